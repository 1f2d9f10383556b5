"""The podmux Python module.  Installed offline with the setuptools already
there (Debian's python3-setuptools), as README.md "Writing a consumer"
shows: pip install --no-index --no-build-isolation ./python, into a venv
made with --system-site-packages or with --target."""
from setuptools import setup

setup(
    name="podmux",
    version="0.1.0",
    description="consumer of podmux's pod update stream (protocol 1)",
    packages=["podmux"],
    python_requires=">=3.7",
)
