// An independent MCP client for 'meshctl mcp': the official TypeScript SDK
// spawns the server over stdio, initializes, lists the tools, sends a
// direct message with send_message, reads the meshd://inbox resource and
// subscribes to it.
// It prints one line of JSON saying what it saw and exits 0, or prints
// why it failed and exits 1.
//
// usage: node client.mjs MESHCTL HOME PEER
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [meshctl, home, peer] = process.argv.slice(2);
if (!meshctl || !home || !peer) {
  console.error("usage: node client.mjs MESHCTL HOME PEER");
  process.exit(2);
}

const want = [
  "mute", "read_inbox", "send_message", "send_request", "send_response",
  "set_presence", "subscribe", "unmute", "unsubscribe",
];

const timer = setTimeout(() => {
  console.error("client.mjs: gave up after 20 s");
  process.exit(1);
}, 20_000);

function check(ok, what) {
  if (!ok) throw new Error(what);
}

const transport = new StdioClientTransport({
  command: meshctl,
  args: ["--home", home, "mcp"],
  stderr: "inherit",
});
const client = new Client({ name: "meshctl-ts-test", version: "1.0.0" });

try {
  await client.connect(transport);
  const server = client.getServerVersion();
  check(server?.name === "meshctl", `server name ${JSON.stringify(server)}`);
  const caps = client.getServerCapabilities();
  check(caps?.tools && caps?.resources?.subscribe === true, `capabilities ${JSON.stringify(caps)}`);

  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  check(JSON.stringify(names) === JSON.stringify(want), `tools ${names}`);
  const send = tools.find((t) => t.name === "send_message");
  check(JSON.stringify([...send.inputSchema.required].sort()) === '["body","target"]',
    `send_message schema ${JSON.stringify(send.inputSchema)}`);

  const sent = await client.callTool({
    name: "send_message",
    arguments: { target: peer, body: "hello from the TypeScript SDK" },
  });
  check(!sent.isError, `send_message failed: ${JSON.stringify(sent.content)}`);
  check(typeof sent.structuredContent?.id === "string", `send_message result ${JSON.stringify(sent)}`);

  const refused = await client.callTool({
    name: "send_message",
    arguments: { target: "nobody-here", body: "x" },
  });
  check(refused.isError === true, `send to an unknown peer was not a tool error: ${JSON.stringify(refused)}`);

  const inbox = await client.readResource({ uri: "meshd://inbox" });
  const contents = inbox.contents[0];
  check(contents.mimeType === "application/json" && Array.isArray(JSON.parse(contents.text).items),
    `meshd://inbox ${JSON.stringify(inbox)}`);

  await client.subscribeResource({ uri: "meshd://inbox" });
  const bogus = await client.subscribeResource({ uri: "meshd://nothing" }).then(() => true, () => false);
  check(!bogus, "subscribed to a resource that does not exist");
  await client.unsubscribeResource({ uri: "meshd://inbox" });

  console.log(JSON.stringify({ ok: true, server, tools: names.length, sent: sent.structuredContent.id }));
  await client.close();
  clearTimeout(timer);
  process.exit(0);
} catch (err) {
  console.error(`client.mjs: ${err.message ?? err}`);
  await client.close().catch(() => {});
  process.exit(1);
}
