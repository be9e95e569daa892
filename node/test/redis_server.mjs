// A real redis-server for the tests, started on a free 127.0.0.1 port (Redis has
// no --port 0) without persistence, and stopped at the end. When redis-server is
// not on PATH the test fails, saying how to install it (never skips). It is
// ready once the server on the port says it is this process (`INFO server`), so
// that another server on the port is never taken for ours; a port taken before
// the first start binds it is given up for a fresh one (at most 5 starts).

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

/** The process id of the Redis server answering on `port` (`INFO server`), or undefined when none answers. */
export function serverPid(port) {
  return new Promise((resolve) => {
    const sock = connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    const done = (pid) => {
      sock.destroy();
      resolve(pid);
    };
    sock.setTimeout(1000, () => done(undefined));
    sock.once('error', () => done(undefined));
    sock.once('close', () => done(undefined));
    sock.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      const eol = buf.indexOf('\r\n');
      if (eol < 0) return;
      if (buf[0] !== 0x24) return done(undefined); // not a bulk reply: an error (still loading), or not Redis
      const size = Number(buf.subarray(1, eol).toString());
      if (buf.length < eol + 2 + size) return;
      const m = /^process_id:(\d+)/m.exec(buf.subarray(eol + 2, eol + 2 + size).toString());
      done(m ? Number(m[1]) : undefined);
    });
    sock.write('INFO server\r\n');
  });
}

/** Start redis-server; resolves with {port, url(query), kill(signal), restart(), stop()} once it answers as this process. */
export async function startRedis() {
  if (spawnSync('redis-server', ['--version']).error) {
    throw new Error('redis-server is not on PATH; install it (apt-get install -y redis-server) — scripts/test-all.sh does');
  }
  let port = await freePort();
  let proc;
  /** Start on `port`: true once it answers as this process, false when it exited or another server has the port. */
  const start = async () => {
    proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: 'ignore',
    });
    const gone = new Promise((r) => proc.once('exit', () => r(false)));
    // Readiness poll (not a timing assumption): up to 10 s for an answer.
    for (let i = 0; i < 200; i++) {
      const pid = await Promise.race([serverPid(port), gone]);
      if (pid === false) return false;
      if (pid !== undefined) {
        if (pid === proc.pid) return true;
        proc.kill('SIGKILL'); // another server has the port: ours cannot bind it
        return false;
      }
      await pause(50);
    }
    throw new Error(`redis-server on port ${port} did not answer within 10 s`);
  };
  for (let attempt = 1; !(await start()); attempt++) {
    if (attempt === 5) throw new Error(`redis-server could not listen on a free port (5 starts, the last on ${port})`);
    port = await freePort();
  }
  const launch = async () => {
    if (!(await start())) throw new Error(`redis-server could not listen on port ${port} again`);
  };
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
