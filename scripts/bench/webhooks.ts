/**
 * Webhooks: createPet with one endpoint subscribed to pet.created against createPet with none, the
 * same server and settings (WEBHOOK_ALLOWED_NETWORKS=loopback, the worker at its defaults), a second
 * at a time in turn: creates a second during each turn, on SQLite and, with the postgres part,
 * PostgreSQL. Events go to webhook-receiver.ts, a child process answering 204 at once. After each
 * subscribed turn, untimed, the bench waits until every event of it has arrived (none lost).
 */
import type autocannon from 'autocannon';
import { type ChildProcess, fork } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { applyLoad, measure, newTally, type Tally } from './load.js';
import {
  check,
  comparisonChecks,
  count,
  type Figures,
  type Part,
  type Role,
  type RoundRun,
  summarise,
} from './report.js';
import { loadRequests, scenarioNamed } from './scenarios.js';
import { PROJECT, type RunningServer, type ServerSpec, withServer } from './servers.js';
import { projectRoot } from './settings.js';
import { type Backend, postgresBackend, sqliteBackend, type Table } from './tables.js';
import type { ReceiverCommand } from './webhook-receiver.js';

/** Subscribed createPet at least 0.9x of createPet with none (issue 38). */
const MIN_RPS_RATIO = 0.9;
/** How long the receiver may take to have every event, before the part fails rather than waits on. */
const DRAIN_LIMIT_MS = 300_000;
const SPEC: ServerSpec = { ...PROJECT, env: { WEBHOOK_ALLOWED_NETWORKS: 'loopback' } };

/** The receiver child process, and what it is asked over IPC. */
export class Receiver {
  private constructor(
    private readonly child: ChildProcess,
    readonly url: string,
  ) {}

  static async start(): Promise<Receiver> {
    const child = fork(join(projectRoot, 'dist/scripts/bench/webhook-receiver.js'), { stdio: 'inherit' });
    const { port } = await new Promise<{ port: number }>((resolve) => child.once('message', resolve));
    return new Receiver(child, `http://127.0.0.1:${port}/hook`);
  }

  /** How many requests have arrived since the last reset. */
  count(): Promise<number> {
    return new Promise((resolve) => {
      this.child.once('message', (message: { count: number }) => resolve(message.count));
      this.child.send('count' satisfies ReceiverCommand);
    });
  }

  reset = () => this.child.send('reset' satisfies ReceiverCommand);

  /** Resolves once `count` requests have arrived in all; throws after DRAIN_LIMIT_MS. */
  async waitFor(count: number): Promise<void> {
    const deadline = performance.now() + DRAIN_LIMIT_MS;
    for (let arrived = await this.count(); arrived < count; arrived = await this.count()) {
      if (performance.now() > deadline) throw new Error(`the receiver had ${arrived} of ${count} events`);
      await sleep(5);
    }
  }

  stop(): void {
    this.child.disconnect();
  }
}

export async function subscribe(origin: string, key: string, url: string): Promise<void> {
  const response = await fetch(`${origin}/v2/webhooks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url, events: ['pet.created'] }),
  });
  if (response.status !== 201) throw new Error(`subscribing answered ${response.status}: ${await response.text()}`);
}

/**
 * Both servers loaded with creates in turn, a second at a time; after each subscribed turn the bench
 * waits until the receiver has every event announced so far (its 201s, the warm-up's included), so
 * that no backlog runs into the next turn. CPU is each server's over its turns and drains.
 */
async function createTurns(
  servers: Record<Role, RunningServer>,
  order: readonly Role[],
  requests: autocannon.Request[],
  { receiver, seconds, announced }: { receiver: Receiver; seconds: number; announced: { count: number } },
) {
  const tallies: Record<Role, Tally> = { project: newTally(), reference: newTally() };
  const cpuMs = { project: 0, reference: 0 };
  for (let second = 0; second < seconds; second += 1) {
    for (const role of order) {
      const server = servers[role];
      const [cpuBefore, created] = [server.cpuMs(), tallies[role].statuses['201'] ?? 0];
      await applyLoad({ origin: server.origin, requests, seconds: 1 }, tallies[role]);
      if (role === 'project') {
        // Creates in flight when the load stopped go uncounted; their events still arrive.
        announced.count += (tallies[role].statuses['201'] ?? 0) - created;
        await receiver.waitFor(announced.count);
      }
      cpuMs[role] += server.cpuMs() - cpuBefore;
    }
  }
  return { tallies, cpuMs };
}

/** One round: a subscribed and an unsubscribed server on fresh copies, warmed up with creates, then measured. */
async function createRound(table: Table, dir: string, receiver: Receiver, round: number, timing: Timing) {
  const order: Role[] = round % 2 === 1 ? ['project', 'reference'] : ['reference', 'project'];
  const requests = loadRequests(scenarioNamed('create'), table);
  receiver.reset();
  const announced = { count: 0 };
  return withServer(SPEC, table, join(dir, 'project'), (subscribed) =>
    withServer(SPEC, table, join(dir, 'reference'), async (unsubscribed): Promise<RoundRun> => {
      await subscribe(subscribed.origin, table.key, receiver.url);
      const servers = { project: subscribed, reference: unsubscribed };
      await createTurns(servers, order, requests, { receiver, seconds: timing.warmupSeconds, announced });
      const turns = await createTurns(servers, order, requests, { receiver, seconds: timing.seconds, announced });
      // Creates a second are 201s a second: a 503 shed by a server busy delivering is cheap and quick.
      const figures = (role: Role): Figures => {
        const { p99Ms, responses, statuses, errors, seconds } = measure(turns.tallies[role]);
        const created = statuses['201'] ?? 0;
        const cpuUs = (turns.cpuMs[role] * 1000) / created;
        return { rps: created / seconds, p99Ms, cpuUs, unexpected: responses - created + errors };
      };
      return { scenario: 'create', project: figures('project'), reference: figures('reference') };
    }),
  );
}

interface Timing {
  seconds: number;
  warmupSeconds: number;
  rounds: number;
}

async function measureOn(
  backend: Backend,
  dir: string,
  receiver: Receiver,
  timing: Timing,
  log: (line: string) => void,
) {
  const table = await backend.seed(dir);
  const runs: RoundRun[] = [];
  for (let round = 1; round <= timing.rounds; round += 1) {
    log(`webhooks, ${backend.name}: createPet subscribed vs not, round ${round}/${timing.rounds}`);
    runs.push(await createRound(table, dir, receiver, round, timing));
  }
  const rows = summarise(runs).map((row) => ({ ...row, scenario: `create (${backend.name})` }));
  const shed = (role: Role) => runs.reduce((sum, run) => sum + run[role].unexpected, 0);
  const checks = [
    ...comparisonChecks(rows, MIN_RPS_RATIO, 'no subscriber').slice(0, -1),
    check(
      'subscribed refuses no create the unsubscribed does not',
      `create (${backend.name})`,
      `${count(shed('project'))} subscribed, ${count(shed('reference'))} not`,
      shed('project') <= shed('reference'),
    ),
  ];
  return { rows, checks };
}

/** The part: on SQLite, and on an embedded PostgreSQL of its own when the postgres part is run too. */
export async function webhooksPart(
  dir: string,
  timing: Timing & { parts: readonly string[] },
  log: (line: string) => void,
): Promise<Part> {
  for (const role of ['project', 'reference']) mkdirSync(join(dir, role), { recursive: true });
  const receiver = await Receiver.start();
  const results = [];
  try {
    results.push(await measureOn(sqliteBackend, dir, receiver, timing, log));
    if (timing.parts.includes('postgres')) {
      const postgres = await postgresBackend();
      try {
        results.push(await measureOn(postgres, dir, receiver, timing, log));
      } finally {
        await postgres.close();
      }
    }
  } finally {
    receiver.stop();
  }
  return {
    name: 'subscribed',
    lines: [],
    rows: results.flatMap(({ rows }) => rows),
    checks: results.flatMap(({ checks }) => checks),
  };
}
