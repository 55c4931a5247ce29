"""A tiny provider that records what an agent sends: every POST body goes to
DIR/NNN.body (its path and headers to DIR/NNN.meta), and the answer is
bench/dialects.py's plain text answer in the dialect the path names (Chat
Completions, Responses, Messages, Gemini), as SSE when the request streams
(`"stream": true`, or Gemini's `:streamGenerateContent`), else JSON.

    python3 bench/requests/record.py PORT DIR
"""
import itertools
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import dialects
out = sys.argv[2]
os.makedirs(out, exist_ok=True)
n = itertools.count()
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        b = b'{"data":[],"models":[]}'
        self.send_response(200); self.send_header("content-type", "application/json"); self.send_header("content-length", str(len(b))); self.end_headers(); self.wfile.write(b)
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        i = next(n)
        p = self.path
        d = "chat" if "chat/completions" in p else "responses" if "/responses" in p else "messages" if "/messages" in p and "count_tokens" not in p else "gemini" if "generatecontent" in p.lower() else None
        with open(f"{out}/{i:03d}.meta", "w") as f:
            json.dump({"path": p, "headers": dict(self.headers), "dialect": d}, f)
        open(f"{out}/{i:03d}.body", "wb").write(body)
        try:
            v = json.loads(body)
        except Exception:
            v = {}
        stream = v.get("stream") is True or "streamGenerateContent" in p
        if d is None:
            text, ctype = '{"input_tokens": 100}', "application/json"
        elif stream:
            text, ctype = dialects.answer_sse(d), "text/event-stream"
        else:
            text, ctype = json.dumps(dialects.answer_json(d)), "application/json"
        b = text.encode()
        self.send_response(200); self.send_header("content-type", ctype); self.send_header("content-length", str(len(b))); self.end_headers(); self.wfile.write(b)
    def log_message(self, *a):
        sys.stderr.write("%s %s\n" % (self.command, self.path))
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
