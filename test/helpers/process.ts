import { type ChildProcess, execFile, spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { issueKey } from '../../src/auth/api-keys.js';
import { main } from '../../src/cli.js';
import { projectRoot } from '../../src/contract/paths.js';
import { conformingFetch, type Teardown } from './api.js';
import { openDatabase } from './backend.js';

export interface ServerProcess {
  child: ChildProcess;
  /** The API base URL from the banner, e.g. http://127.0.0.1:41234/v1 (https:// with TLS). */
  baseUrl: string;
  /** The development key, when the banner printed one. */
  key: string | undefined;
  /** Everything written to stdout so far. */
  output(): string;
  /** Sends a signal and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts the production build as `npm start` does, on a random port, and waits for the banner. */
export async function startServerProcess(t: Teardown, env: Record<string, string>): Promise<ServerProcess> {
  const child = spawn(process.execPath, [join(projectRoot, 'dist/src/server.js')], {
    // METRICS_PORT 0: test servers run side by side, and the default port would be taken. No
    // shedding unless a test asks: tests share a busy machine, and a 503 there would be noise.
    env: {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: '0',
      METRICS_PORT: '0',
      OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
      LOG_LEVEL: 'info',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });

  // A limit for a server that hangs, not a timing: a start on a loaded machine, files in parallel
  // (npm test), can take far longer than the second it takes alone.
  const deadline = Date.now() + 60_000;
  let banner: RegExpExecArray | null = null;
  while (banner === null) {
    if (child.exitCode !== null) throw new Error(`server exited ${child.exitCode}: ${stderr}${stdout}`);
    if (Date.now() > deadline) throw new Error(`no banner within 60 s: ${stderr}${stdout}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
    // The suites that start a process call v1, which the banner names on a line of its own.
    banner = /^ {2}v1: (https?:\/\/\S+\/v1) /m.exec(stdout);
  }
  // The key, when there is one, is printed alone on the banner's last line in the same write.
  const key = /^(psk_\S+)$/m.exec(stdout)?.[1];
  return {
    child,
    baseUrl: banner[1] ?? '',
    key,
    output: () => stdout,
    stop: async (signal = 'SIGTERM') => {
      child.kill(signal);
      return exited;
    },
  };
}

/** Calls a server process's API with `key` (and `headers`); every answer is checked against the contract. */
export function clientOf(server: ServerProcess, key: string) {
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- a typed view of a validated body
  return async <T>(
    method: string,
    path: string,
    body?: object,
    headers: Record<string, string> = {},
  ): Promise<{ status: number; body: T }> => {
    const type = method === 'PATCH' ? 'application/merge-patch+json' : 'application/json';
    const response = await conformingFetch(
      new Request(`${server.baseUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${key}`,
          ...(body === undefined ? {} : { 'content-type': type }),
          ...headers,
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      }),
    );
    const text = await response.text();
    return { status: response.status, body: (text === '' ? undefined : JSON.parse(text)) as T };
  };
}

/** Starts the server expecting it to refuse: its exit code (null if still running after 15 s) and what it said. */
export function failedStart(env: Record<string, string>) {
  const result = spawnSync(process.execPath, [join(projectRoot, 'dist/src/server.js')], {
    env: { ...process.env, PORT: '0', METRICS_PORT: 'off', ...env },
    encoding: 'utf8',
    timeout: 15_000,
  });
  return { code: result.status, stderr: result.stderr };
}

const execFileAsync = promisify(execFile);

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs `petstore <args>` in this process, as bin/petstore.js runs it (`main` with the process's
 * environment and `env` over it): its exit code and output. A process of its own costs a few
 * tenths of a second of CPU and the suites run a hundred; runCliProcess runs the command itself.
 */
export async function runCli(args: string[], env: Record<string, string>): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const code = await main(args, {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    env: { ...process.env, ...env },
  });
  return { code, stdout, stderr };
}

/** Runs `petstore <args>` as a process, the package's bin, and returns its exit code and output. */
export async function runCliProcess(args: string[], env: Record<string, string>): Promise<CliResult> {
  try {
    const { stdout, stderr } = await execFileAsync(process.execPath, [join(projectRoot, 'bin/petstore.js'), ...args], {
      env: { ...process.env, ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

/** A database with one account and key, as `petstore accounts/keys create` would leave it. */
export async function databaseWithKey(databaseUrl: string): Promise<string> {
  const storage = await openDatabase(databaseUrl);
  try {
    const account = await storage.accounts.createAccount('ops');
    return (await issueKey(storage.accounts, account.id)).key;
  } finally {
    await storage.close();
  }
}
