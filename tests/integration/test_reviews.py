#!/usr/bin/env python3
"""Integration tests of the test API server's TokenReview and
SubjectAccessReview (scripts/fake-apiserver), which the local Kubernetes
API's delegated authentication and authorization (src/kube/review.h,
doc/kube-api.md "Who may read it") are tested against: the answers its
tables give, the counts, faults, and that no token reaches its request
log.
"""

import http.client
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from fakeapi import FakeAPI  # noqa: E402
from harness import test  # noqa: E402

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
SECRET = "s3cret-token-text"


def post(srv, path, body, token="podmux-own"):
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        c.request("POST", path, json.dumps(body).encode(),
                  {"Content-Type": "application/json",
                   "Authorization": "Bearer " + token})
        r = c.getresponse()
        return r.status, json.loads(r.read().decode() or "null")
    finally:
        c.close()


def token_review(srv, token):
    return post(srv, TOKEN_REVIEWS, {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {"token": token}})


def access_review(srv, user, verb, namespace="", name=None):
    ra = {"group": "", "version": "v1", "resource": "pods", "verb": verb,
          "namespace": namespace}
    if name:
        ra["name"] = name
    return post(srv, ACCESS_REVIEWS, {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": ["system:authenticated"],
                 "resourceAttributes": ra}})


ALICE = {"username": "alice", "uid": "u-1",
         "groups": ["system:authenticated"], "extra": {"k": ["v"]}}


@test("TokenReview answers from the token table; no token in the log")
def test_token_review_table(t):
    srv = FakeAPI(t, tokens=["podmux-own"])
    srv.set_reviews(tokens={SECRET: ALICE, "revoked": {"error": "expired"}})
    status, body = token_review(srv, SECRET)
    assert status == 201, status
    assert body["status"] == {"authenticated": True, "user": ALICE}, body
    assert body["spec"] == {}, body             # the token is not echoed
    status, body = token_review(srv, "unknown")
    assert body["status"] == {"authenticated": False}, body["status"]
    status, body = token_review(srv, "revoked")
    assert body["status"] == {"authenticated": False,
                              "error": "expired"}, body
    n = srv.reviews()["tokenreviews"]
    assert n == 3, n
    # The reviewer itself must be authenticated, as at the API server.
    status, _ = post(srv, TOKEN_REVIEWS, {"kind": "TokenReview",
                                          "spec": {"token": SECRET}},
                     token="nope")
    assert status == 401, status
    status, _ = post(srv, TOKEN_REVIEWS, {"kind": "Pod"})
    assert status == 400, status
    log = json.dumps(srv.requests())
    assert SECRET not in log, "the token is in the request log"
    kinds = [r["kind"] for r in srv.requests()]
    assert "tokenreview" in kinds, kinds


@test("SubjectAccessReview answers from the first matching rule")
def test_access_review_table(t):
    srv = FakeAPI(t)
    srv.set_reviews(access=[
        {"user": "alice", "verb": "get", "namespace": "default",
         "name": "web", "allowed": True},
        {"user": "alice", "verb": "list", "namespace": "default",
         "allowed": True},
        {"user": "alice", "verb": "*", "allowed": False,
         "reason": "no RBAC rule"}])
    cases = [(("alice", "get", "default", "web"), {"allowed": True}),
             (("alice", "get", "default", "db"),
              {"allowed": False, "reason": "no RBAC rule"}),
             (("alice", "list", "default"), {"allowed": True}),
             (("bob", "list", "default"), {"allowed": False})]
    for args, want in cases:
        got = access_review(srv, *args)[1]["status"]
        assert got == want, (args, got)
    r = srv.reviews()
    assert r["subjectaccessreviews"] == 4, r["subjectaccessreviews"]
    assert r["access"][0]["resourceAttributes"]["name"] == "web", r
    assert r["access"][3]["user"] == "bob", r["access"][3]["user"]
    srv.clear_reviews()
    r = srv.reviews()
    assert r == {"ok": True, "tokenreviews": 0, "subjectaccessreviews": 0,
                 "access": []}, r


@test("faults of kind reviews answer and count; any leaves reviews alone")
def test_review_faults(t):
    srv = FakeAPI(t)
    srv.set_reviews(tokens={SECRET: ALICE})
    srv.fail(match="reviews", status=503, count=1)
    status, body = token_review(srv, SECRET)
    assert status == 503, status
    assert body["kind"] == "Status", body["kind"]
    status, _ = token_review(srv, SECRET)
    assert status == 201, status
    n = srv.reviews()["tokenreviews"]
    assert n == 2, n                            # a fault counts too
    # "any" leaves reviews alone, as it leaves the events alone.
    srv.fail(match="any", status=500, count=1)
    status, _ = token_review(srv, SECRET)
    assert status == 201, status


if __name__ == "__main__":
    harness.main()
