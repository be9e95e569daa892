// A real redis-server for the tests, started on a free 127.0.0.1 port (Redis has
// no --port 0) without persistence, and stopped at the end. When redis-server is
// not on PATH the test fails, saying how to install it (never skips).

import { spawn, spawnSync } from 'node:child_process';
import { connect, createServer } from 'node:net';

/** A 127.0.0.1 port nobody listens on right now. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** One raw RESP command over a fresh socket; resolves with the reply's text (for PING and admin commands). */
export function rawCommand(port, args) {
  return new Promise((resolve, reject) => {
    const sock = connect(port, '127.0.0.1');
    let buf = '';
    sock.setTimeout(2000, () => sock.destroy(new Error('raw command timed out')));
    sock.once('error', reject);
    sock.on('data', (d) => {
      buf += d.toString('utf8');
      if (buf.endsWith('\r\n')) {
        sock.end();
        resolve(buf);
      }
    });
    sock.write(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(String(a))}\r\n${a}\r\n`).join('')}`);
  });
}

const pause = (ms) => new Promise((r) => setTimeout(r, ms));

/** Start redis-server; resolves with {port, url(query), kill(signal), restart(), stop()} once it answers PING. */
export async function startRedis() {
  if (spawnSync('redis-server', ['--version']).error) {
    throw new Error('redis-server is not on PATH; install it (apt-get install -y redis-server) — scripts/test-all.sh does');
  }
  const port = await freePort();
  let proc;
  const launch = async () => {
    proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: 'ignore',
    });
    // Readiness poll (not a timing assumption): up to 10 s for the first PONG.
    for (let i = 0; i < 200; i++) {
      try {
        if ((await rawCommand(port, ['PING'])).startsWith('+PONG')) return;
      } catch {
        // not listening yet
      }
      await pause(50);
    }
    throw new Error(`redis-server on port ${port} did not answer PING within 10 s`);
  };
  await launch();
  const exited = () => new Promise((r) => (proc.exitCode !== null || proc.signalCode !== null ? r() : proc.once('exit', r)));
  return {
    port,
    url: (query = '') => `redis://127.0.0.1:${port}/0${query ? `?${query}` : ''}`,
    /** SIGKILL the server and wait until it is gone. */
    async kill() {
      proc.kill('SIGKILL');
      await exited();
    },
    /** Send a signal (SIGSTOP / SIGCONT: a server that accepts but never answers). */
    signal(sig) {
      proc.kill(sig);
    },
    /** Start it again on the same port (empty: no persistence). */
    restart: launch,
    async stop() {
      proc.kill('SIGKILL');
      await exited();
    },
  };
}
