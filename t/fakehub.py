#!/usr/bin/env python3
"""A fake Hugging Face hub on loopback, for hf-fetch's tests.

Serves the repos under --root (ROOT/models/OWNER/NAME/..., ROOT/datasets/...)
at one commit each, through the endpoints hf-fetch and huggingface_hub use:

  GET  /api/{models,datasets}/REPO/revision/REV    sha + siblings (with sizes, blobId, lfs)
  GET  /api/{models,datasets}/REPO/tree/REV[/PATH] the recursive file list
  HEAD/GET /[datasets/]REPO/resolve/REV/PATH       plain files: 200 + ETag (git sha1);
                                                   LFS files: 302 to the "CDN" on another
                                                   host name (X-Linked-Etag = sha256, X-Linked-Size)
  GET  /cdn/SHA256                                 LFS bytes, Range honoured

Knobs (see --help) make it misbehave: auth, redirects, cut connections, 429,
500, a wrong sha256, slow bodies, no Range.  Every request is appended to
--log as one tab-separated line:
  METHOD PATH RANGE STATUS BODY_BYTES_SENT AUTH(none|good|bad) INFLIGHT
where INFLIGHT counts the file bodies being sent when this one started.
The port is written to --port-file once listening.
"""
import argparse
import hashlib
import json
import os
import re
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, unquote, urlsplit

A = None            # parsed arguments
LOCK = threading.Lock()
COUNT = {"fail500": 0, "s429": 0, "cut": 0, "inflight": 0}
REPOS = {}          # (kind, repo) -> {"commit", "files": {path: info}}


def load_repos(root):
    for kind in ("models", "datasets"):
        base = os.path.join(root, kind)
        if not os.path.isdir(base):
            continue
        for owner in sorted(os.listdir(base)):
            for name in sorted(os.listdir(os.path.join(base, owner))):
                top = os.path.join(base, owner, name)
                files = {}
                for d, _, fs in os.walk(top):
                    for f in fs:
                        full = os.path.join(d, f)
                        rel = os.path.relpath(full, top).replace(os.sep, "/")
                        size, s1, s256 = os.path.getsize(full), hashlib.sha1(), hashlib.sha256()
                        s1.update(b"blob %d\0" % size)
                        with open(full, "rb") as fp:
                            for block in iter(lambda: fp.read(1 << 20), b""):
                                s1.update(block)
                                s256.update(block)
                        files[rel] = {"full": full, "size": size, "oid": s1.hexdigest(),
                                      "sha256": s256.hexdigest(), "lfs": size >= A.lfs_min}
                h = hashlib.sha1()
                for rel in sorted(files):
                    h.update(rel.encode() + b"\0" + files[rel]["sha256"].encode())
                REPOS[(kind, owner + "/" + name)] = {"commit": h.hexdigest(), "files": files}


def bump(key, limit):
    """True for the first `limit` calls with this key."""
    with LOCK:
        if COUNT[key] < limit:
            COUNT[key] += 1
            return True
    return False


class Hub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def record(self, status, sent, inflight=0):
        if not A.log:
            return
        a = self.headers.get("Authorization")
        auth = "none" if a is None else ("good" if A.auth and a == "Bearer " + A.auth else "bad")
        line = "\t".join([self.command, self.path, self.headers.get("Range", "-"), str(status), str(sent), auth,
                          str(inflight)])
        with LOCK:
            with open(A.log, "a") as f:
                f.write(line + "\n")

    def reply(self, status, headers=(), body=b"", sent=None):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.record(status, 0 if self.command == "HEAD" else len(body) if sent is None else sent)

    def error(self, status, code=None, msg=""):
        h = [("Content-Type", "application/json")]
        if code:
            h.append(("X-Error-Code", code))
        if msg:
            h.append(("X-Error-Message", msg))
        self.reply(status, h, json.dumps({"error": msg or code or "error"}).encode())

    def authorized(self):
        return not A.auth or self.headers.get("Authorization") == "Bearer " + A.auth

    def do_HEAD(self):
        self.route()

    def do_GET(self):
        self.route()

    def route(self):
        path = urlsplit(self.path).path
        if A.fail500 and bump("fail500", A.fail500):
            return self.error(500, msg="injected failure")
        if A.redirects and "/resolve/" in path and not path.startswith("/hop/") and \
                "hops=done" not in self.path:
            return self.reply(307, [("Location", "/hop/%d%s" % (A.redirects, path))])
        m = re.match(r"^/hop/(\d+)(/.*)$", path)
        if m:
            n = int(m.group(1))
            return self.reply(307, [("Location", "/hop/%d%s" % (n - 1, m.group(2)) if n > 1
                                     else m.group(2) + "?hops=done")])
        m = re.match(r"^/api/(models|datasets)/([^/]+(?:/[^/]+)?)/(revision|tree)/([^/]+)(/.*)?$", path)
        if m:
            return self.api(m.group(1), m.group(2), m.group(3), unquote(m.group(4)))
        m = re.match(r"^/cdn/([0-9a-f]{64})$", path)
        if m:
            return self.cdn(m.group(1))
        m = re.match(r"^/(datasets/)?([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
        if m:
            return self.resolve("datasets" if m.group(1) else "models", m.group(2), unquote(m.group(3)),
                                unquote(m.group(4)))
        self.error(404, msg="no such endpoint")

    def repo(self, kind, repo, rev):
        r = REPOS.get((kind, repo))
        if r is None or not self.authorized():
            self.error(401, "RepoNotFound", "Repository not found")
            return None
        if rev not in ("main", r["commit"]):
            self.error(404, "RevisionNotFound", "Invalid rev id: " + rev)
            return None
        return r

    def api(self, kind, repo, what, rev):
        r = self.repo(kind, repo, rev)
        if r is None:
            return
        if what == "tree":
            out = []
            for p, f in sorted(r["files"].items()):
                e = {"type": "file", "oid": f["oid"], "size": f["size"], "path": p}
                if f["lfs"]:
                    e["lfs"] = {"oid": f["sha256"], "size": f["size"], "pointerSize": 130}
                out.append(e)
        else:
            sib = []
            for p, f in sorted(r["files"].items()):
                e = {"rfilename": p, "size": f["size"], "blobId": f["oid"]}
                if f["lfs"]:
                    e["lfs"] = {"sha256": f["sha256"], "size": f["size"], "pointerSize": 130}
                sib.append(e)
            out = {"id": repo, "modelId": repo, "sha": r["commit"], "private": bool(A.auth),
                   "siblings": sib}
        self.reply(200, [("Content-Type", "application/json")], json.dumps(out).encode())

    def resolve(self, kind, repo, rev, name):
        r = self.repo(kind, repo, rev)
        if r is None:
            return
        f = r["files"].get(name)
        if f is None:
            self.send_response(404)
            self.send_header("X-Error-Code", "EntryNotFound")
            self.send_header("X-Repo-Commit", r["commit"])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return self.record(404, 0)
        common = [("X-Repo-Commit", r["commit"]), ("Accept-Ranges", "bytes")]
        if f["lfs"]:
            port = self.server.server_address[1]
            loc = "http://%s:%d/cdn/%s" % (A.cdn_host, port, f["sha256"])
            return self.reply(302, common + [("Location", loc), ("ETag", '"%s"' % f["oid"]),
                                             ("X-Linked-Etag", '"%s"' % f["sha256"]),
                                             ("X-Linked-Size", str(f["size"]))])
        self.body(f, common + [("ETag", '"%s"' % f["oid"])])

    def cdn(self, sha):
        for r in REPOS.values():
            for f in r["files"].values():
                if f["sha256"] == sha:
                    return self.body(f, [("ETag", '"%s"' % sha)])
        self.error(404, msg="no such blob")

    def body(self, f, headers):
        if self.command == "GET" and A.s429 and bump("s429", A.s429):
            return self.reply(429, [("Retry-After", str(A.retry_after))], b"slow down")
        size = f["size"]
        lo, hi, status = 0, size - 1, 200
        rng = self.headers.get("Range")
        m = re.match(r"^bytes=(\d+)-(\d*)$", rng or "")
        if m and not A.no_range:
            lo = int(m.group(1))
            hi = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
            if lo >= size or hi < lo:
                return self.reply(416, [("Content-Range", "bytes */%d" % size)])
            status = 206
            headers = headers + [("Content-Range", "bytes %d-%d/%d" % (lo, hi, size))]
        n = hi + 1 - lo
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(n))
        self.end_headers()
        if self.command == "HEAD":
            return self.record(status, 0)
        cut = n > A.cut and A.cut_times and bump("cut", A.cut_times)
        corrupt = A.corrupt and f["full"].endswith("/" + A.corrupt)
        with LOCK:
            COUNT["inflight"] += 1
            inflight = COUNT["inflight"]
        try:
            sent = self.stream(f["full"], lo, min(n, A.cut) if cut else n, corrupt)
        finally:
            with LOCK:
                COUNT["inflight"] -= 1
        self.record(status, sent, inflight)
        if cut:
            self.wfile.flush()
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stream(self, path, lo, n, corrupt):
        """Send n bytes of path from lo (the first byte of the file flipped when corrupt)."""
        sent, step = 0, 4096 if A.slow else 1 << 20
        try:
            with open(path, "rb") as fp:
                fp.seek(lo)
                while sent < n:
                    part = fp.read(min(step, n - sent))
                    if not part:
                        break
                    if corrupt and lo + sent == 0:
                        part = bytes([part[0] ^ 1]) + part[1:]
                    if A.slow:
                        time.sleep(len(part) / A.slow)
                    self.wfile.write(part)
                    sent += len(part)
        except (BrokenPipeError, ConnectionResetError):
            pass
        return sent


def main():
    global A
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", required=True, help="ROOT/{models,datasets}/OWNER/NAME/files")
    p.add_argument("--port-file", required=True)
    p.add_argument("--log", help="append one line per request here")
    p.add_argument("--lfs-min", type=int, default=1024, help="files this big or more are LFS")
    p.add_argument("--cdn-host", default="localhost", help="host name of LFS redirects")
    p.add_argument("--auth", help="require 'Authorization: Bearer AUTH' on the API and resolve")
    p.add_argument("--cut", type=int, default=0, help="cut file bodies after this many bytes ...")
    p.add_argument("--cut-times", type=int, default=0, help="... for the first N bodies")
    p.add_argument("--s429", type=int, default=0, help="answer the first N file GETs with 429")
    p.add_argument("--retry-after", type=int, default=1)
    p.add_argument("--fail500", type=int, default=0, help="answer the first N requests with 500")
    p.add_argument("--corrupt", help="flip a byte of files with this name (ETag unchanged)")
    p.add_argument("--slow", type=float, default=0, help="bytes per second for file bodies")
    p.add_argument("--redirects", type=int, default=0, help="same-host 307 hops before each resolve")
    p.add_argument("--no-range", action="store_true", help="ignore Range headers")
    A = p.parse_args()
    load_repos(A.root)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    srv.daemon_threads = True
    tmp = A.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, A.port_file)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
