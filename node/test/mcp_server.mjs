// A real MCP server for the tests: the SDK's McpServer behind its
// StreamableHTTPServerTransport (stateful, one transport per session) on a
// node:http server at 127.0.0.1, recording every JSON-RPC message POSTed to it.

import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';

/**
 * Serve McpServers made by `register(server)` (one per session). `forget()`
 * drops every session, as a restarted server does: a request on a forgotten
 * session is answered 404 (MCP spec, streamable HTTP, "Session Management").
 */
export async function serveMcp(register) {
  const sessions = new Map();
  const bodies = [];
  const http = createServer(async (req, res) => {
    let body;
    if (req.method === 'POST') {
      const chunks = [];
      for await (const c of req) chunks.push(c);
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      bodies.push(body);
    }
    const id = req.headers['mcp-session-id'];
    if (id !== undefined) {
      const transport = sessions.get(id);
      if (transport === undefined) {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32600, message: 'Session not found' } }));
        return;
      }
      await transport.handleRequest(req, res, body);
      return;
    }
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (sid) => sessions.set(sid, transport),
    });
    const server = new McpServer({ name: 'tools', version: '1.0.0' });
    await register(server);
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  });
  await new Promise((resolve) => http.listen(0, '127.0.0.1', resolve));
  const url = new URL(`http://127.0.0.1:${http.address().port}/mcp`);
  return {
    url,
    bodies,
    methods: () => bodies.map((b) => b.method),
    find: (method) => bodies.filter((b) => b.method === method),
    forget: async () => {
      const old = [...sessions.values()];
      sessions.clear();
      await Promise.all(old.map((t) => t.close()));
    },
    close: async () => {
      await Promise.all([...sessions.values()].map((t) => t.close()));
      http.closeAllConnections();
      await new Promise((resolve) => http.close(resolve));
    },
  };
}
