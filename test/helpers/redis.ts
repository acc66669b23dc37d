import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { connect } from 'node:net';
import { delimiter, join } from 'node:path';
import { freePort } from '../../scripts/local-servers.js';
import { temporaryDirectory, type Teardown } from './api.js';

const INSTALL = 'apt-get install -y redis-server';

export interface RedisServer {
  url: string;
  /** Stops the server (an outage); only for a server of the test's own. */
  stop(): Promise<void>;
  /** Starts it again on the same port, empty, and waits until it answers. */
  start(): Promise<void>;
  /** Freezes the server (SIGSTOP): connections stay open but nothing is answered, as in a hang. */
  pause(): void;
  /** Lets a paused server run again. */
  resume(): void;
}

export interface RedisOptions {
  /** The test stops and starts the server: it needs one of its own, even when TEST_REDIS_URL is set. */
  stoppable?: boolean;
}

function redisServerBinary(): string | undefined {
  const dirs = (process.env.PATH ?? '').split(delimiter).filter((dir) => dir !== '');
  return dirs.map((dir) => join(dir, 'redis-server')).find((path) => existsSync(path));
}

function usesTestRedisUrl(options: RedisOptions): boolean {
  return process.env.TEST_REDIS_URL !== undefined && process.env.TEST_REDIS_URL !== '' && options.stoppable !== true;
}

/**
 * Why a Redis test cannot run here (for tap's `skip`), or false. Under CI it is always false: a
 * missing server then fails the test in startRedis instead of skipping it.
 */
export function redisMissing(options: RedisOptions = {}): string | false {
  if (process.env.CI !== undefined && process.env.CI !== '') return false;
  if (usesTestRedisUrl(options) || redisServerBinary() !== undefined) return false;
  return `no redis-server on the PATH (install it with: ${INSTALL}${options.stoppable === true ? '' : ', or set TEST_REDIS_URL'})`;
}

/** True when a Redis on the port answers PING. */
function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => socket.write('PING\r\n'));
    socket.setTimeout(1_000, () => socket.destroy());
    socket.once('data', (data) => {
      socket.destroy();
      resolve(data.toString().startsWith('+PONG'));
    });
    socket.once('error', () => resolve(false));
    socket.once('close', () => resolve(false));
  });
}

/**
 * A Redis for the test: a redis-server of its own on a free port (no persistence, in a temporary
 * folder, gone after the test), or the TEST_REDIS_URL server, its keys apart under a prefix of
 * their own.
 */
export async function startRedis(t: Teardown, options: RedisOptions = {}): Promise<RedisServer> {
  if (usesTestRedisUrl(options)) {
    const url = new URL(process.env.TEST_REDIS_URL ?? '');
    url.searchParams.set('keyPrefix', `petstore-test-${randomUUID()}:`);
    const external = () => {
      throw new Error('the TEST_REDIS_URL server is not stopped by tests');
    };
    return { url: url.href, stop: external, start: external, pause: external, resume: external };
  }
  const binary = redisServerBinary();
  if (binary === undefined) throw new Error(`no redis-server on the PATH; install it with: ${INSTALL}`);
  let child: ChildProcess | undefined;

  const stop = async () => {
    const running = child;
    child = undefined;
    if (running?.exitCode !== null) return;
    const exited = new Promise((resolve) => running.once('exit', resolve));
    running.kill('SIGKILL');
    await exited;
  };
  const start = async () => {
    if (child !== undefined) throw new Error('redis-server is already running');
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir];
    const started = spawn(binary, args, { cwd: dir, stdio: 'ignore' });
    child = started;
    const deadline = Date.now() + 10_000;
    while (!(await answersPing(port))) {
      if (started.exitCode !== null) throw new Error(`redis-server exited ${started.exitCode}`);
      if (Date.now() > deadline) throw new Error(`redis-server did not answer on port ${port} within 10 s`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  t.teardown(stop);
  const dir = temporaryDirectory(t);
  const port = await freePort();
  await start();
  const signal = (name: NodeJS.Signals) => () => {
    if (child?.kill(name) !== true) throw new Error('redis-server is not running');
  };
  return { url: `redis://127.0.0.1:${port}`, stop, start, pause: signal('SIGSTOP'), resume: signal('SIGCONT') };
}
