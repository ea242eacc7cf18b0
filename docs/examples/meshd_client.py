#!/usr/bin/env python3
"""Talk to a running meshd over its control socket, standard library only.

The control API is HTTP/JSON on the Unix socket <home>/meshd.sock; see
docs/control-api.yaml for every endpoint.

    python3 meshd_client.py --home ~/.meshd status
    python3 meshd_client.py --home ~/.meshd send '#ops' 'deploy finished'
    python3 meshd_client.py --home ~/.meshd inbox
    python3 meshd_client.py --home ~/.meshd events --count 3

Each command prints one JSON object per line. Errors go to stderr as
"meshd: ERROR" and "hint: HINT", with exit status 1.
"""

import argparse
import http.client
import json
import os
import socket
import sys


class UnixHTTPConnection(http.client.HTTPConnection):
    """An HTTP connection to a Unix socket instead of a TCP address."""

    def __init__(self, path, timeout=30):
        super().__init__("meshd", timeout=timeout)  # the host name is not used
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


class MeshdError(Exception):
    """An error answer: {"error": "...", "hint": "..."} with a 4xx or 5xx."""

    def __init__(self, status, body):
        super().__init__(body.get("error", "meshd answered %d" % status))
        self.status = status
        self.hint = body.get("hint", "")


def call(sock, method, path, body=None, timeout=30):
    """Sends one request and returns the decoded JSON answer."""
    conn = UnixHTTPConnection(sock, timeout)
    try:
        headers = {}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        if resp.status >= 300:
            try:
                raise MeshdError(resp.status, json.loads(raw))
            except ValueError:  # the router's plain-text 404 or 405
                raise MeshdError(resp.status, {"error": raw.decode(errors="replace").strip()})
        return json.loads(raw)
    finally:
        conn.close()


def events(sock, count):
    """Yields up to count inbox items from GET /v1/events as they arrive.

    The stream is server-sent events: "event: item" with one item as JSON
    on its "data:" line, "event: lagged" when this reader fell behind
    (read the inbox to catch up), and comment lines starting with ':'.
    """
    conn = UnixHTTPConnection(sock, timeout=None)  # the stream idles between items
    try:
        conn.request("GET", "/v1/events", headers={"Accept": "text/event-stream"})
        resp = conn.getresponse()
        if resp.status >= 300:
            raise MeshdError(resp.status, json.loads(resp.read() or b"{}"))
        kind, data, seen = "", [], 0
        while seen < count:
            line = resp.readline()
            if not line:
                return  # meshd ended the stream
            line = line.decode().rstrip("\r\n")
            if line.startswith(":"):
                # The first comment arrives once meshd has registered us.
                if line == ": meshd inbox events":
                    print(json.dumps({"listening": True}), flush=True)
                continue
            if line:
                field, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if field == "event":
                    kind = value
                elif field == "data":
                    data.append(value)
                continue
            if kind == "item" and data:
                seen += 1
                yield json.loads("\n".join(data))
            elif kind == "lagged":
                yield {"lagged": True}
            kind, data = "", []
    finally:
        conn.close()


def main():
    ap = argparse.ArgumentParser(description="a small meshd control API client")
    ap.add_argument("--home", default=os.environ.get("MESH_HOME", os.path.expanduser("~/.meshd")))
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("status", help="this node and its org")
    s = sub.add_parser("send", help="send a message to a channel or a peer")
    s.add_argument("to", help="#channel, or a peer's name")
    s.add_argument("body")
    i = sub.add_parser("inbox", help="unread inbox items")
    i.add_argument("--all", action="store_true", help="include read items")
    e = sub.add_parser("events", help="follow delivered items")
    e.add_argument("--count", type=int, default=1, help="stop after this many items")
    args = ap.parse_args()
    sock = os.path.join(args.home, "meshd.sock")

    def out(v):
        print(json.dumps(v), flush=True)

    try:
        if args.cmd == "status":
            st = call(sock, "GET", "/v1/status")
            out({"name": st.get("name", ""), "org": st["org"], "role": st["role"], "links": st["links"]})
        elif args.cmd == "send":
            sent = call(sock, "POST", "/v1/send", {"to": args.to, "body": args.body})
            out({"id": sent["id"], "to": sent["to"], "sent_to": sent["sent_to"] or []})
        elif args.cmd == "inbox":
            q = "?all=1" if args.all else ""
            for it in call(sock, "GET", "/v1/inbox" + q)["items"]:
                out({"id": it["id"], "from": it["from"].get("name", it["from"]["fingerprint"]),
                     "to": it["to"], "kind": it["kind"], "body": it.get("body", "")})
        elif args.cmd == "events":
            for it in events(sock, args.count):
                if it.get("lagged"):
                    out({"lagged": True})
                    continue
                out({"id": it["id"], "from": it["from"].get("name", ""), "to": it["to"],
                     "body": it.get("body", "")})
    except MeshdError as err:
        print("meshd: %s" % err, file=sys.stderr)
        if err.hint:
            print("hint: %s" % err.hint, file=sys.stderr)
        return 1
    except (FileNotFoundError, ConnectionRefusedError):
        print("meshd: not running (no control socket at %s)" % sock, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
