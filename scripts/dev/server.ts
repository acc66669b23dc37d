/**
 * The server child of `npm run dev`: dist/src/server.js with PETSTORE_DEV=1, otherwise the same
 * configuration as `npm start` (the environment). A restart stops the running server and starts
 * a standby one (scripts/dev/standby.ts) that has already loaded its packages, then readies the
 * next standby once the new server serves.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { projectRoot } from '../../src/contract/paths.js';

/** The first line a server prints once it listens (src/server.ts). */
const SERVING = 'Pet Store API at ';
const standbyScript = join(projectRoot, 'dist', 'scripts', 'dev', 'standby.js');

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

export class DevServer {
  private running: ChildProcess | undefined;
  private standby: ChildProcess | undefined;
  private stopping = false;
  /** Called with each server's first serving line. */
  private readonly servingNow = new WeakMap<ChildProcess, () => void>();

  /** `onStopped` hears of a server that stopped by itself (it failed to start, or crashed). */
  constructor(private readonly onStopped: (how: string) => void) {}

  get serving(): boolean {
    return this.running !== undefined;
  }

  private spawnStandby(): ChildProcess {
    const child = spawn(process.execPath, [standbyScript], {
      cwd: projectRoot,
      env: { ...process.env, PETSTORE_DEV: '1' },
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    });
    // A standby prints nothing until it starts; its output is passed on line by line.
    createInterface({ input: child.stdout as Readable }).on('line', (line) => {
      process.stdout.write(`${line}\n`);
      if (line.startsWith(SERVING)) this.servingNow.get(child)?.();
    });
    child.once('exit', (code, signal) => {
      if (this.standby === child) this.standby = undefined;
      if (this.running !== child || this.stopping) return;
      this.running = undefined;
      this.onStopped(signal ?? `exit ${String(code)}`);
    });
    return child;
  }

  private async stopRunning(): Promise<void> {
    const running = this.running;
    this.running = undefined;
    if (running === undefined || exited(running)) return;
    const stopped = new Promise((resolve) => running.once('exit', resolve));
    running.kill('SIGTERM');
    await stopped;
  }

  /** Replaces the running server; resolves true once the new one serves, false if it stopped. */
  async restart(): Promise<boolean> {
    const next = this.standby !== undefined && !exited(this.standby) ? this.standby : this.spawnStandby();
    this.standby = undefined;
    await this.stopRunning();
    this.running = next;
    const serving = new Promise<boolean>((resolve) => {
      this.servingNow.set(next, () => resolve(true));
      next.once('exit', () => resolve(false));
    });
    next.send('start');
    const served = await serving;
    // Loading the next one's packages now would compete with this start for the cores.
    if (!this.stopping) this.standby = this.spawnStandby();
    return served;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.standby?.kill('SIGTERM');
    await this.stopRunning();
  }
}
