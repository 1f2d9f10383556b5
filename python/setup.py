"""The podmux Python module: `pip install ./python` (offline: setuptools
is Debian's python3-setuptools; no build dependency is fetched)."""
from setuptools import setup

setup(
    name="podmux",
    version="0.1.0",
    description="consumer of podmux's pod update stream (protocol 1)",
    packages=["podmux"],
    python_requires=">=3.7",
)
