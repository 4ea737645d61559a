#!/usr/bin/env python3
"""Seed rocrate-validator's HTTP cache (requests-cache, SQLite) with the two JSON-LD contexts
an agentrace RO-Crate names, from the copies beside this file, so that
`rocrate-validator validate --offline --cache-path CACHE` needs no network.

    python3 seed_cache.py CACHE      (writes CACHE.sqlite)

The copies: `ro-crate-1.1-context.jsonld` is the RO-Crate 1.1 context (ResearchObject/ro-crate,
docs/_specification/1.1/context.jsonld, v1.1.3); `workflow-run-context.jsonld` the Workflow Run
terms (ResearchObject/ro-terms, workflow-run/context.jsonld). A transport adapter answers the
validator's requests from them; the session settings are the validator's own
(rocrate_validator.utils.http), so the cache keys match.
"""
import io
import sys
from pathlib import Path

import requests
from requests.adapters import BaseAdapter
from requests_cache import CachedSession
from urllib3 import HTTPResponse

HERE = Path(__file__).resolve().parent
LOCAL = {
    "https://w3id.org/ro/crate/1.1/context": HERE / "ro-crate-1.1-context.jsonld",
    "https://w3id.org/ro/terms/workflow-run/context": HERE / "workflow-run-context.jsonld",
}


class LocalFileAdapter(BaseAdapter):
    def send(self, request, **kwargs):
        path = LOCAL.get(request.url)
        if path is None:
            raise requests.ConnectionError(f"no local copy of {request.url}")
        data = path.read_bytes()
        resp = requests.Response()
        resp.request = request
        resp.url = request.url
        resp.status_code = 200
        resp.reason = "OK"
        resp.headers["Content-Type"] = "application/ld+json"
        resp.headers["Content-Length"] = str(len(data))
        resp.raw = HTTPResponse(body=io.BytesIO(data), headers=dict(resp.headers), status=200,
                                reason="OK", preload_content=False, decode_content=False,
                                request_url=request.url)
        resp.encoding = "utf-8"
        return resp

    def close(self):
        pass


if len(sys.argv) != 2:
    sys.exit("usage: seed_cache.py CACHE")
session = CachedSession(cache_name=sys.argv[1], backend="sqlite", expire_after=-1,
                        allowable_methods=("GET",), allowable_codes=(200, 302, 404))
session.mount("https://", LocalFileAdapter())
session.mount("http://", LocalFileAdapter())
for url in LOCAL:
    r = session.get(url, force_refresh=True)
    r.json()
    print(f"cached {url}: {len(r.content)} bytes", file=sys.stderr)
