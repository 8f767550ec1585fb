// Harness: a tiny HTTP server speaking the subset of the Upstash REST protocol that redlease's HTTP adapter
// uses, in front of a real redis-server. POST / with a JSON array command → 200 { result } or 400 { error } with
// Redis's message; a missing or wrong Bearer token → 401. Listens on 127.0.0.1, port 0; runs on Node, Bun and
// Deno (node:http). No official Upstash REST server can be installed here, so this is what the adapter is tested
// against.
import { Buffer } from "node:buffer";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createClient } from "redis";

export interface HttpBridge {
  /** The REST URL, e.g. `http://127.0.0.1:54321/`. */
  readonly url: string;
  readonly token: string;
  /** Requests served so far (any status). */
  readonly requests: number;
  stop(): Promise<void>;
}

function reply(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": String(Buffer.byteLength(text)) });
  res.end(text);
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

export async function startHttpBridge(redisUrl: string): Promise<HttpBridge> {
  const token = crypto.randomUUID();
  const redis = createClient({ url: redisUrl });
  redis.on("error", () => {});
  await redis.connect();
  let requests = 0;
  const server = createServer((req, res) => {
    requests++;
    void (async () => {
      if (req.headers.authorization !== `Bearer ${token}`) return reply(res, 401, { error: "Unauthorized" });
      if (req.method !== "POST" || (req.url ?? "/") !== "/") return reply(res, 405, { error: "Method Not Allowed" });
      let command: unknown;
      try {
        command = JSON.parse(await readBody(req));
      } catch {
        return reply(res, 400, { error: "ERR failed to parse command" });
      }
      if (!Array.isArray(command) || command.length === 0) {
        return reply(res, 400, { error: "ERR command must be a non-empty JSON array" });
      }
      try {
        const result = await redis.sendCommand(command.map(String));
        reply(res, 200, { result: result ?? null });
      } catch (e) {
        reply(res, 400, { error: e instanceof Error ? e.message : String(e) });
      }
    })().catch(() => {
      if (!res.headersSent) reply(res, 500, { error: "bridge failure" });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/`,
    token,
    get requests() {
      return requests;
    },
    async stop() {
      (server as { closeAllConnections?: () => void }).closeAllConnections?.();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await redis.disconnect().catch(() => {});
    },
  };
}
