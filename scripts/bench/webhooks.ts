/**
 * Webhooks (issue 27, item 8), on SQLite, every server with WEBHOOK_ALLOWED_NETWORKS=loopback and the
 * worker's settings at their defaults, delivering to webhook-receiver.ts (a child process answering
 * 204 at once, on the same two cores as the server and the load):
 * - createPet with one endpoint subscribed to pet.created against createPet with none, the same
 *   server and settings, a second at a time in turn: creates a second during each turn (an outbox
 *   decouples the write from its delivery). After each subscribed turn, untimed, the bench waits
 *   until its receiver has every event of it (none lost) and reports how long that drain took; the
 *   subscribed server must shed no create the other does not;
 * - sustained delivery: a server started on an outbox of waiting events, delivered events a second
 *   at the receiver between its 10% and 90% arrivals;
 * - commit to receipt at light load (an open loop of creates), from when the client had the 201.
 */
import type autocannon from 'autocannon';
import { type ChildProcess, fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { projectRoot } from '../../src/contract/paths.js';
import { DEFAULT_WEBHOOKS } from '../../src/events/settings.js';
import { openPostgres } from '../../src/storage/postgres/index.js';
import { openSqlite } from '../../src/storage/sqlite/index.js';
import { applyLoad, measure, newTally, type Tally } from './load.js';
import { check, comparisonChecks, median, ms, type RoundRun, summarise } from './report.js';
import type { Figures, Role } from './report.js';
import { expectedResponses, loadRequests, scenarioNamed } from './scenarios.js';
import { PROJECT, type RunningServer, type ServerSpec, withServer } from './servers.js';
import { type Backend, postgresBackend, sqliteBackend, type Table } from './tables.js';
import type { Arrival, ReceiverCommand, ReceiverMessage } from './webhook-receiver.js';

export const WEBHOOK_TARGETS = { minRpsRatio: 0.9, minDeliveredPerSecond: 1000, maxCommitToReceiptP99Ms: 250 };
/** Creates a second at light load, each due at a fixed time whether or not earlier ones were answered. */
const LIGHT_LOAD_RPS = 50;
/** How long the receiver may take to have every event, before the part fails rather than waits on. */
const DRAIN_LIMIT_MS = 300_000;
/** No event for this long after the last expected: nothing more is on its way. */
const QUIET_MS = 300;
const SPEC: ServerSpec = { ...PROJECT, env: { WEBHOOK_ALLOWED_NETWORKS: 'loopback' } };
/** A folder for each server's copy of the table: two servers run at once. */
const LIVES = ['subscribed', 'unsubscribed', 'backlog'];
const NAMES: Record<Role, string> = { project: 'subscribed', baseline: 'no subscription' };

const now = () => performance.timeOrigin + performance.now();

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

  private ask<T extends ReceiverMessage>(command: ReceiverCommand): Promise<T> {
    return new Promise((resolve) => {
      this.child.once('message', resolve);
      this.child.send(command);
    });
  }

  count = () => this.ask<{ count: number; cpuMs: number }>('count');
  report = () => this.ask<{ arrivals: Arrival[]; cpuMs: number }>('report');
  reset = () => this.child.send('reset' satisfies ReceiverCommand);

  /** Resolves once `count` requests have arrived in all; throws after DRAIN_LIMIT_MS. */
  async waitFor(count: number, onProgress?: (arrived: { count: number; cpuMs: number }) => void): Promise<void> {
    const deadline = performance.now() + DRAIN_LIMIT_MS;
    for (;;) {
      const arrived = await this.count();
      onProgress?.(arrived);
      if (arrived.count >= count) return;
      if (performance.now() > deadline) throw new Error(`the receiver had ${arrived.count} of ${count} events`);
      await sleep(5);
    }
  }

  /**
   * Resolves once `count` requests have arrived and no more came for QUIET_MS: an autocannon load
   * counts no answer still in flight when it ends, yet those creates are announced too.
   */
  async quiet(count: number): Promise<void> {
    await this.waitFor(count);
    for (let before = -1, arrived = 0; before !== arrived;) {
      before = arrived;
      await sleep(QUIET_MS);
      arrived = (await this.count()).count;
    }
  }

  stop(): void {
    this.child.disconnect();
  }
}

async function subscribe(origin: string, key: string, url: string): Promise<void> {
  const response = await fetch(`${origin}/v1/webhooks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url, events: ['pet.created'] }),
  });
  if (response.status !== 201) throw new Error(`subscribing answered ${response.status}: ${await response.text()}`);
}

/** The value at `fraction` of the sorted values, as load.ts's p99 takes it. */
export function percentile(values: readonly number[], fraction: number): number {
  const sorted = Float64Array.from(values).sort();
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))] ?? NaN;
}

/** Events a second between the arrivals at 10% and 90%: the steady part, without start and tail. */
export function steadyRate(arrivals: readonly number[]): { perSecond: number; windowMs: number; events: number } {
  const sorted = Float64Array.from(arrivals).sort();
  const [from, to] = [Math.floor(sorted.length * 0.1), Math.floor(sorted.length * 0.9)];
  const windowMs = (sorted[to] ?? NaN) - (sorted[from] ?? NaN);
  return { perSecond: ((to - from) * 1000) / windowMs, windowMs, events: to - from };
}

/**
 * Commit to receipt for each pet created: from when its 201 reached the client (`acknowledged`, by
 * pet id), and from the payload's `timestamp` (the server's clock as it wrote the event). Events of
 * other pets, repeated ids and pets never announced are counted, not measured.
 */
export function commitToReceipt(acknowledged: ReadonlyMap<number, number>, arrivals: readonly Arrival[]) {
  const fromAck: number[] = [];
  const fromTimestamp: number[] = [];
  const seen = new Set<string>();
  let strays = 0;
  for (const { id, body, at } of arrivals) {
    const payload = JSON.parse(body) as { timestamp: string; data: { id: number } };
    const ackedAt = acknowledged.get(payload.data.id);
    if (ackedAt === undefined || seen.has(id)) {
      strays += 1;
      continue;
    }
    seen.add(id);
    fromAck.push(at - ackedAt);
    fromTimestamp.push(at - Date.parse(payload.timestamp));
  }
  return { fromAck, fromTimestamp, strays, missing: acknowledged.size - seen.size };
}

/** A keep-alive POST /v1/pets; resolves with its status, the pet's id and when the answer was read. */
function createPet(origin: string, key: string, agent: Agent): Promise<{ status: number; id: number; at: number }> {
  return new Promise((resolve, reject) => {
    const sent = request(`${origin}/v1/pets`, {
      method: 'POST',
      agent,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    });
    sent.on('response', (response) => {
      let body = '';
      response.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
      response.on('end', () => {
        const at = now();
        const status = response.statusCode ?? 0;
        resolve({ status, id: status === 201 ? (JSON.parse(body) as { id: number }).id : NaN, at });
      });
    });
    sent.on('error', reject);
    sent.end(JSON.stringify({ name: 'Rex', categoryId: 1 }));
  });
}

/**
 * Both servers loaded with creates in turn, a second at a time; after each subscribed turn, outside
 * its second, the bench waits until the receiver has every event announced (`announced`: its 201s so
 * far, the warm-up's included), so that no backlog runs into the next turn. CPU is each server's over
 * its turns (and the subscribed one's drains), and the receiver's over the subscribed server's.
 */
async function createTurns(
  servers: Record<Role, RunningServer>,
  order: readonly Role[],
  requests: autocannon.Request[],
  { receiver, seconds, announced }: { receiver: Receiver; seconds: number; announced: { count: number } },
) {
  const tallies: Record<Role, Tally> = { project: newTally(), baseline: newTally() };
  const cpuMs = { project: 0, baseline: 0, receiver: 0 };
  const drain = { ms: 0, events: 0 };
  for (let second = 0; second < seconds; second += 1) {
    for (const role of order) {
      const server = servers[role];
      const [serverBefore, created] = [server.cpuMs(), tallies[role].statuses['201'] ?? 0];
      const receiverBefore = (await receiver.count()).cpuMs;
      await applyLoad({ origin: server.origin, requests, seconds: 1 }, tallies[role]);
      if (role === 'project') {
        const drainFrom = performance.now();
        // Up to a connection's worth of creates in flight when the load stopped go uncounted: their
        // events still arrive, so a later drain may end that many events early (~1% of a turn's).
        announced.count += (tallies[role].statuses['201'] ?? 0) - created;
        const waiting = announced.count - (await receiver.count()).count;
        await receiver.waitFor(announced.count);
        drain.ms += performance.now() - drainFrom;
        drain.events += Math.max(0, waiting);
        cpuMs.receiver += (await receiver.count()).cpuMs - receiverBefore;
      }
      cpuMs[role] += server.cpuMs() - serverBefore;
    }
  }
  return { tallies, cpuMs, drain };
}

interface CreateRound {
  run: RoundRun;
  /** After the subscribed server's turns: how long until every event had arrived, and how many were waiting. */
  drainMs: number;
  drainedEvents: number;
  receiverCpuUs: number;
  /** 503s, by server: overload protection shedding. */
  shed: Record<Role, number>;
}

/**
 * One round: a subscribed and an unsubscribed server on fresh copies of the table, warmed up with
 * creates, then measured; which goes first alternates.
 */
async function createRound(
  table: Table,
  dir: string,
  receiver: Receiver,
  round: number,
  timing: Timing & { backend: string },
) {
  const label = `${timing.backend} ${table.pets / 1000}k`;
  const order: Role[] = round % 2 === 1 ? ['project', 'baseline'] : ['baseline', 'project'];
  const create = scenarioNamed('create');
  const requests = loadRequests(create, table);
  receiver.reset();
  const announced = { count: 0 };
  return withServer(SPEC, table, join(dir, 'subscribed'), (subscribed) =>
    withServer(SPEC, table, join(dir, 'unsubscribed'), async (unsubscribed): Promise<CreateRound> => {
      await subscribe(subscribed.origin, table.key, receiver.url);
      const servers = { project: subscribed, baseline: unsubscribed };
      await createTurns(servers, order, requests, { receiver, seconds: timing.warmupSeconds, announced });
      const turns = await createTurns(servers, order, requests, { receiver, seconds: timing.seconds, announced });
      // Creates a second are 201s a second: a 503 shed by a server busy delivering is cheap and quick.
      // CPU a create is over the turns and, subscribed, the drains after them: delivery included.
      const figures = (role: Role): Figures => {
        const { p99Ms, responses, statuses, errors } = measure(turns.tallies[role]);
        const created = expectedResponses(create, statuses);
        const cpuUs = (turns.cpuMs[role] * 1000) / created;
        return { rps: created / turns.tallies[role].seconds, p99Ms, cpuUs, unexpected: responses - created + errors };
      };
      const created = expectedResponses(create, turns.tallies.project.statuses);
      const shed = (role: Role) => turns.tallies[role].statuses['503'] ?? 0;
      return {
        run: { table: label, scenario: 'create', project: figures('project'), baseline: figures('baseline') },
        drainMs: turns.drain.ms / timing.seconds,
        drainedEvents: turns.drain.events / timing.seconds,
        receiverCpuUs: (turns.cpuMs.receiver * 1000) / created,
        shed: { project: shed('project'), baseline: shed('baseline') },
      };
    }),
  );
}

/** A table (SQLite or PostgreSQL) whose copies hold an endpoint subscribed at `url` and `events` pets created after it: an outbox waiting. */
function withBacklog(table: Table, url: string, events: number): Table {
  return {
    ...table,
    async freshCopy(dir) {
      const database = await table.freshCopy(dir);
      const storage = database.startsWith('postgres')
        ? await openPostgres({ connectionString: database, poolSize: 2, timeoutMs: 60_000 })
        : openSqlite({ filename: database });
      try {
        const account = await storage.accounts.createAccount('webhooks bench');
        const secret = `whsec_${randomBytes(24).toString('base64')}`;
        await storage.webhooks.create(
          account.id,
          { url, events: ['pet.created'] },
          secret,
          DEFAULT_WEBHOOKS.maxEndpoints,
        );
        for (let n = 1; n <= events; n += 1) {
          await storage.pets.create({ name: `Backlog ${n}`, categoryId: 1, status: 'available' });
        }
      } finally {
        await storage.close();
      }
      return database;
    },
  };
}

/** The server's and the receiver's CPU when `arrived` events had arrived. */
interface Mark {
  arrived: number;
  serverCpuMs: number;
  receiverCpuMs: number;
}

const cpuPerEvent = (from: Mark | undefined, to: Mark | undefined, pick: (mark: Mark) => number) =>
  from === undefined || to === undefined ? NaN : ((pick(to) - pick(from)) * 1000) / (to.arrived - from.arrived);

/**
 * A server started on `backlog` waiting events delivers them (the worker starts with the server);
 * once all have arrived, it is warmed up with creates and then loaded with LIGHT_LOAD_RPS creates a
 * second, each announced to the same receiver.
 */
async function deliveryAndLatency(table: Table, dir: string, receiver: Receiver, timing: Timing) {
  const backlog = timing.seconds * 5000;
  receiver.reset();
  return withServer(SPEC, withBacklog(table, receiver.url, backlog), join(dir, 'backlog'), async (server) => {
    const marks: (Mark | undefined)[] = [undefined, undefined];
    await receiver.waitFor(backlog, ({ count, cpuMs }) => {
      const mark = { arrived: count, serverCpuMs: server.cpuMs(), receiverCpuMs: cpuMs };
      if (marks[0] === undefined && count >= backlog * 0.1) marks[0] = mark;
      if (marks[1] === undefined && count >= backlog * 0.9) marks[1] = mark;
    });
    const { arrivals } = await receiver.report();
    const delivery = {
      backlog,
      ...steadyRate(arrivals.map((arrival) => arrival.at)),
      repeated: arrivals.length - new Set(arrivals.map((arrival) => arrival.id)).size,
      serverCpuUs: cpuPerEvent(marks[0], marks[1], (mark) => mark.serverCpuMs),
      receiverCpuUs: cpuPerEvent(marks[0], marks[1], (mark) => mark.receiverCpuMs),
    };

    const warmup = measure(
      await applyLoad({
        origin: server.origin,
        requests: loadRequests(scenarioNamed('create'), table),
        seconds: timing.warmupSeconds,
      }),
    );
    await receiver.quiet(backlog + (warmup.statuses['201'] ?? 0));
    receiver.reset();
    const agent = new Agent({ keepAlive: true });
    const total = LIGHT_LOAD_RPS * timing.seconds * 5;
    const start = performance.now();
    const answers: Promise<{ status: number; id: number; at: number }>[] = [];
    for (let n = 0; n < total; n += 1) {
      await sleep(start + (n * 1000) / LIGHT_LOAD_RPS - performance.now());
      answers.push(createPet(server.origin, table.key, agent));
    }
    const answered = await Promise.all(answers);
    agent.destroy();
    const acknowledged = new Map(answered.filter((a) => a.status === 201).map((a) => [a.id, a.at]));
    await receiver.quiet(acknowledged.size);
    const latency = commitToReceipt(acknowledged, (await receiver.report()).arrivals);
    const statuses: Record<string, number> = {};
    for (const { status } of answered) statuses[status] = (statuses[status] ?? 0) + 1;
    return { delivery, latency: { ...latency, statuses, refused: total - acknowledged.size } };
  });
}

interface Timing {
  seconds: number;
  warmupSeconds: number;
  rounds: number;
}

/** What one backend measured: the rounds of createPet, then delivery and latency. */
interface OnBackend {
  backend: string;
  rounds: CreateRound[];
  measured: Awaited<ReturnType<typeof deliveryAndLatency>>;
}

const count = (value: number) => Math.round(value).toLocaleString('en-US');
const spread = (values: number[]) =>
  `p50 ${ms(percentile(values, 0.5))}, p99 ${ms(percentile(values, 0.99))}, max ${ms(Math.max(...values))} ms`;

/** What the results table does not show: the subscribed server's turns in parts, delivery, latency. */
function describe({ backend, rounds, measured: { delivery, latency } }: OnBackend): string[] {
  const medianOf = (pick: (round: CreateRound) => number) => median(rounds.map(pick));
  const shed = (role: Role) => count(rounds.reduce((sum, round) => sum + round.shed[role], 0));
  return [
    `Webhooks (${backend}, 10k table): the project with WEBHOOK_ALLOWED_NETWORKS=loopback, the worker at its defaults,`,
    'delivering to a child process that answers 204 at once, on the same two cores.',
    `createPet with one endpoint subscribed to pet.created vs none, creates/s during the turns. After a subscribed`,
    `turn, ${count(medianOf((r) => r.drainedEvents))} events were still to arrive and did in ${count(medianOf((r) => r.drainMs))} ms (${count(medianOf((r) => (r.drainedEvents * 1000) / r.drainMs))} events/s); receiver CPU`,
    `${count(medianOf((r) => r.receiverCpuUs))} µs/event (medians of ${rounds.length} rounds, per turn); shed as 503: ${shed('project')} subscribed, ${shed('baseline')} not.`,
    `Delivery: ${count(delivery.backlog)} events waiting at the server's start; between the 10% and 90% arrivals`,
    `${count(delivery.perSecond)} events/s (${count(delivery.events)} in ${ms(delivery.windowMs)} ms), server CPU ${count(delivery.serverCpuUs)} µs/event, receiver ${count(delivery.receiverCpuUs)}; ${delivery.repeated} repeated.`,
    `Commit to receipt at ${LIGHT_LOAD_RPS} creates/s (answers ${JSON.stringify(latency.statuses)}; ${latency.missing} never received, ${latency.strays} other):`,
    `  from the 201 at the client: ${spread(latency.fromAck)}`,
    `  from the payload's timestamp: ${spread(latency.fromTimestamp)}`,
  ];
}

/** `backend`'s 10k table: createPet subscribed and not over the rounds, then delivery and latency. */
async function measureOn(
  backend: Backend,
  dir: string,
  receiver: Receiver,
  timing: Timing,
  log: (line: string) => void,
) {
  const table = await backend.seed(dir, 10_000);
  const rounds: CreateRound[] = [];
  const on = { ...timing, backend: backend.name };
  for (let round = 1; round <= timing.rounds; round += 1) {
    log(`webhooks, ${backend.name}: createPet subscribed vs not, round ${round}/${timing.rounds}`);
    rounds.push(await createRound(table, dir, receiver, round, on));
  }
  log(`webhooks, ${backend.name}: delivering a backlog, then commit to receipt at light load`);
  return { backend: backend.name, rounds, measured: await deliveryAndLatency(table, dir, receiver, on) };
}

/** Throughput against no subscription, delivery a second (a target on SQLite only), commit to receipt; each line names the backend. */
function checksOf({ backend, rounds, measured: { delivery, latency } }: OnBackend) {
  const p99 = percentile(latency.fromAck, 0.99);
  const delivered = check(
    `delivered >= ${count(WEBHOOK_TARGETS.minDeliveredPerSecond)} events/s`,
    'a backlog, worker defaults',
    `${count(delivery.perSecond)}/s, ${delivery.repeated} repeated`,
    delivery.perSecond >= WEBHOOK_TARGETS.minDeliveredPerSecond && delivery.repeated === 0,
  );
  const shed = (role: Role) => rounds.reduce((sum, round) => sum + round.shed[role], 0);
  const checks = [
    ...comparisonChecks(summarise(rounds.map((round) => round.run)), WEBHOOK_TARGETS, NAMES),
    check(
      'subscribed sheds no create (none more than without)',
      'createPet, 503s',
      `${count(shed('project'))} subscribed, ${count(shed('baseline'))} not`,
      shed('project') <= shed('baseline'),
    ),
    ...(backend === sqliteBackend.name ? [delivered] : []),
    check(
      `commit to receipt p99 <= ${WEBHOOK_TARGETS.maxCommitToReceiptP99Ms} ms`,
      `${LIGHT_LOAD_RPS} creates/s, from the 201`,
      `${ms(p99)} ms, ${latency.missing} never received`,
      p99 <= WEBHOOK_TARGETS.maxCommitToReceiptP99Ms && latency.missing === 0 && latency.refused === 0,
    ),
  ];
  return checks.map((one) => ({ ...one, line: `${backend}: ${one.line}` }));
}

/**
 * The part, on SQLite, and also on an embedded PostgreSQL of its own when the postgres part is run
 * too: its lines, its rows of the results table and its target checks.
 */
export async function webhooksPart(
  dir: string,
  timing: Timing & { parts: readonly string[] },
  log: (line: string) => void,
) {
  for (const life of LIVES) mkdirSync(join(dir, life), { recursive: true });
  const receiver = await Receiver.start();
  const results: OnBackend[] = [];
  try {
    results.push(await measureOn(sqliteBackend, dir, receiver, timing, log));
    if (timing.parts.includes('postgres')) {
      log('webhooks: starting an embedded PostgreSQL');
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
    lines: results.flatMap((result, index) => [...(index > 0 ? [''] : []), ...describe(result)]),
    rows: summarise(results.flatMap(({ rounds }) => rounds.map((round) => round.run))),
    checks: results.flatMap(checksOf),
  };
}
