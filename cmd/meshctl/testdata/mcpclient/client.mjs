// An independent MCP client for 'meshctl mcp': the official TypeScript SDK
// spawns the server over stdio and drives it under the newest protocol
// version the SDK speaks (2025-11-25): the tools, the meshd://inbox
// resource and its doorbell, wait_inbox, the mesh view tools, and then a
// second server with --claude-channel and its channel push.
//
// It talks to the Go test on stdout, one JSON object a line: {"phase": P}
// when the test should make the peer send something (P is "subscribed",
// "waiting" or "channel"), and at the end one line with "ok": true saying
// what it saw; it exits 0. On failure it prints why and exits 1.
//
// usage: node client.mjs MESHCTL HOME PEER CHANNEL
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [meshctl, home, peer, channel] = process.argv.slice(2);
if (!meshctl || !home || !peer || !channel) {
  console.error("usage: node client.mjs MESHCTL HOME PEER CHANNEL");
  process.exit(2);
}

const want = [
  "cancel_request", "claim", "delivery_status", "find_agents", "list_channels", "list_peers", "list_requests", "mark_read", "mute", "post_subagent_result",
  "read_attachment", "read_conversation", "read_history", "read_inbox", "reply", "request_any", "search",
  "send_message", "send_request", "send_response", "set_presence", "subscribe",
  "unmute", "unsubscribe", "wait_inbox",
];

const timer = setTimeout(() => {
  console.error("client.mjs: gave up after 50 s");
  process.exit(1);
}, 50_000);

function check(ok, what) {
  if (!ok) throw new Error(what);
}

function phase(p) {
  console.log(JSON.stringify({ phase: p }));
}

// connect starts 'meshctl mcp' with extra flags and returns the client and
// the protocol version it negotiated.
async function connect(flags, setup) {
  const transport = new StdioClientTransport({
    command: meshctl,
    args: ["--home", home, "mcp", "--log-level", "debug", ...flags],
    stderr: "inherit",
  });
  let version = "";
  const set = transport.setProtocolVersion?.bind(transport);
  transport.setProtocolVersion = (v) => { version = v; set?.(v); };
  const client = new Client({ name: "meshctl-ts-test", version: "1.0.0" });
  setup?.(client);
  await client.connect(transport);
  return { client, version };
}

// next returns a promise of the next value pushed into a queue, and a push
// function.
function queue() {
  const items = [];
  const waiters = [];
  return {
    push(v) { const w = waiters.shift(); w ? w(v) : items.push(v); },
    next() { return items.length ? Promise.resolve(items.shift()) : new Promise((r) => waiters.push(r)); },
  };
}

async function tool(client, name, args) {
  const res = await client.callTool({ name, arguments: args ?? {} });
  check(!res.isError, `${name} failed: ${JSON.stringify(res.content)}`);
  return res.structuredContent;
}

let client;
try {
  const updates = queue();
  let version;
  ({ client, version } = await connect([], (c) =>
    c.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => updates.push(n.params.uri))));
  check(version === "2025-11-25", `negotiated protocol version ${version}`);

  const server = client.getServerVersion();
  check(server?.name === "meshctl", `server name ${JSON.stringify(server)}`);
  const caps = client.getServerCapabilities();
  check(caps?.tools && caps?.resources?.subscribe === true, `capabilities ${JSON.stringify(caps)}`);
  check(!caps?.experimental?.["claude/channel"], "claude/channel declared without --claude-channel");

  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  check(JSON.stringify(names) === JSON.stringify(want), `tools ${names}`);
  const send = tools.find((t) => t.name === "send_message");
  check(JSON.stringify([...send.inputSchema.required].sort()) === '["body","target"]',
    `send_message schema ${JSON.stringify(send.inputSchema)}`);
  const wait = tools.find((t) => t.name === "wait_inbox");
  check(wait.inputSchema.properties.timeout_seconds.maximum === 600 && !wait.inputSchema.required,
    `wait_inbox schema ${JSON.stringify(wait.inputSchema)}`);

  const sent = await tool(client, "send_message", { target: peer, body: "hello from the TypeScript SDK" });
  check(typeof sent?.id === "string", `send_message result ${JSON.stringify(sent)}`);

  const refused = await client.callTool({ name: "send_message", arguments: { target: "nobody-here", body: "x" } });
  check(refused.isError === true, `send to an unknown peer was not a tool error: ${JSON.stringify(refused)}`);

  // The doorbell: resources/subscribe, then the peer sends a DM.
  await client.subscribeResource({ uri: "meshd://inbox" });
  const bogus = await client.subscribeResource({ uri: "meshd://nothing" }).then(() => true, () => false);
  check(!bogus, "subscribed to a resource that does not exist");
  phase("subscribed");
  for (;;) {
    check((await updates.next()) === "meshd://inbox", "update for another resource");
    const inbox = await client.readResource({ uri: "meshd://inbox" });
    const c = inbox.contents[0];
    check(c.mimeType === "application/json", `meshd://inbox ${JSON.stringify(inbox)}`);
    if (JSON.parse(c.text).items.some((it) => it.body === "ding from the peer")) break;
  }
  await client.unsubscribeResource({ uri: "meshd://inbox" });

  // wait_inbox returns the item the peer sends during the wait.
  await tool(client, "read_inbox", { mark_read: true });
  phase("waiting");
  const start = Date.now();
  const woke = await tool(client, "wait_inbox", { timeout_seconds: 30 });
  check(!woke.timed_out && woke.items.some((it) => it.body === "during the wait"),
    `wait_inbox: ${JSON.stringify(woke)}`);
  check(Date.now() - start < 25_000, "wait_inbox took as long as its timeout");
  const item = woke.items.find((it) => it.body === "during the wait");
  const marked = await tool(client, "mark_read", { id: item.id });
  check(marked.read === true && marked.id === item.id, `mark_read ${JSON.stringify(marked)}`);
  const badID = await client.callTool({ name: "mark_read", arguments: { id: "no-such-item" } });
  check(badID.isError === true, `mark_read of no item: ${JSON.stringify(badID)}`);

  // Nothing unread: wait_inbox returns empty at its timeout.
  await tool(client, "read_inbox", { mark_read: true });
  const t0 = Date.now();
  const empty = await tool(client, "wait_inbox", { timeout_seconds: 1 });
  check(empty.timed_out === true && empty.items.length === 0 && Date.now() - t0 >= 900,
    `wait_inbox at the timeout: ${JSON.stringify(empty)} after ${Date.now() - t0} ms`);
  const tooLong = await client.callTool({ name: "wait_inbox", arguments: { timeout_seconds: 601 } });
  check(tooLong.isError === true, `wait_inbox 601 s: ${JSON.stringify(tooLong)}`);

  // The mesh view.
  const peers = await tool(client, "list_peers");
  const p = peers.peers.find((x) => x.name === peer);
  check(p && p.linked === true && ["online", "away", "offline"].includes(p.presence), `list_peers ${JSON.stringify(peers)}`);
  const chans = await tool(client, "list_channels");
  check(chans.channels.some((c) => c.name === channel), `list_channels ${JSON.stringify(chans)}`);
  const hist = await tool(client, "read_history", { channel: "#" + channel, since: "1h" });
  check(hist.channel === channel && hist.messages.length > 0, `read_history ${JSON.stringify(hist)}`);
  await client.close();

  // The Claude Code channel push: declared, and each waking item pushed.
  const pushes = queue();
  const ch = await connect(["--claude-channel"], (c) => {
    c.fallbackNotificationHandler = async (n) => {
      if (n.method === "notifications/claude/channel") pushes.push(n.params);
    };
  });
  client = ch.client;
  const chCaps = client.getServerCapabilities();
  check(chCaps?.experimental?.["claude/channel"], `capabilities with --claude-channel ${JSON.stringify(chCaps)}`);
  phase("channel");
  let push;
  do {
    push = await pushes.next();
  } while (push.content !== "pushed to the channel");
  check(push.meta.kind === "message" && push.meta.from === peer && typeof push.meta.item_id === "string",
    `channel notification ${JSON.stringify(push)}`);

  console.log(JSON.stringify({ ok: true, server, version, tools: names.length, sent: sent.id, push }));
  await client.close();
  clearTimeout(timer);
  process.exit(0);
} catch (err) {
  console.error(`client.mjs: ${err.message ?? err}`);
  await client?.close().catch(() => {});
  process.exit(1);
}
