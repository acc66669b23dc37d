import { readFileSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { Agent, request as httpsRequest } from 'node:https';
import type { Pet } from '../../src/storage/types.js';
import type { Teardown } from './api.js';
import { assertConforms, contract } from './contract.js';
import { TEST_CERT_FILE } from './haproxy.js';

/** The shape of the request ids HAProxy and the instances make. */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  /** How the answer departs from openapi.yaml, if it does. */
  violation?: string;
}

/**
 * A client of the balancer over HTTPS, trusting the test certificate (or `ca`), connecting from its own
 * loopback address (127.0.0.2 and 127.0.0.3 are as much this host as 127.0.0.1), connections kept
 * alive. Every answer is checked against openapi.yaml.
 */
export function balancerClient(
  t: Teardown,
  origin: string,
  { from = '127.0.0.1', key = '', ca = TEST_CERT_FILE } = {},
) {
  const agent = new Agent({ keepAlive: true, ca: readFileSync(ca), localAddress: from });
  t.teardown(() => agent.destroy());
  return (method: string, path: string, { body, headers = {} }: { body?: object; headers?: object } = {}) =>
    new Promise<Answer>((resolve, reject) => {
      const url = `${contract.basePath}${path}`;
      const sent = httpsRequest(
        `${origin}${url}`,
        {
          method,
          agent,
          headers: {
            ...(key === '' ? {} : { authorization: `Bearer ${key}` }),
            ...(body === undefined
              ? {}
              : { 'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json' }),
            ...headers,
          },
        },
        (response) => {
          let text = '';
          response.on('data', (chunk: Buffer) => (text += chunk.toString()));
          response.on('end', () => {
            const answer: Answer = { status: response.statusCode ?? 0, headers: response.headers, body: text };
            try {
              assertConforms(method, url, { statusCode: answer.status, headers: answer.headers, body: text });
            } catch (error) {
              answer.violation = (error as Error).message;
            }
            resolve(answer);
          });
          response.on('error', reject);
        },
      );
      sent.on('error', reject);
      sent.end(body === undefined ? undefined : JSON.stringify(body));
    });
}

export type Client = ReturnType<typeof balancerClient>;

export interface Outcome {
  operation: string;
  /** Safe for the balancer to send again after the instance read it (see deploy/haproxy.cfg). */
  replayable: boolean;
  sentAt: number;
  answeredAt: number;
  status?: number;
  failure?: string | undefined;
}

/**
 * An open loop of mixed reads and writes at a steady rate: a list, a pet by id, a create (every
 * other one with an Idempotency-Key when `keyedCreates`), a rename, in turn. Every acknowledged
 * create is kept.
 */
export class SteadyLoad {
  readonly outcomes: Outcome[] = [];
  readonly created: Pet[] = [];
  private readonly pending = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  private sent = 0;

  constructor(
    private readonly call: Client,
    private readonly perSecond: number,
    private readonly keyedCreates = false,
  ) {}

  start(): void {
    this.timer = setInterval(() => this.fire(), 1000 / this.perSecond);
  }

  /** Sends `count` more requests of the same mix at once. */
  burst(count: number): void {
    for (let i = 0; i < count; i += 1) this.fire();
  }

  /** Requests sent and not yet answered. */
  inFlight(): number {
    return this.pending.size;
  }

  async stop(): Promise<Outcome[]> {
    clearInterval(this.timer);
    while (this.pending.size > 0) await Promise.all(this.pending);
    return this.outcomes;
  }

  private fire(): void {
    const turn = this.sent++;
    const known = this.created[turn % Math.max(1, this.created.length)];
    const keyed = this.keyedCreates && turn % 8 === 2;
    const requests: [string, boolean, () => Promise<Answer>][] = [
      ['listPets', true, () => this.call('GET', '/pets?limit=20')],
      ['getPet', true, () => this.call('GET', `/pets/${known?.id ?? 1}`)],
      [
        'createPet',
        keyed,
        () =>
          this.call('POST', '/pets', {
            body: { name: `load ${turn}`, categoryId: 1 + (turn % 5) },
            headers: keyed ? { 'idempotency-key': `load-${turn}` } : {},
          }),
      ],
      ['updatePet', false, () => this.call('PATCH', `/pets/${known?.id ?? 1}`, { body: { name: `renamed ${turn}` } })],
    ];
    // Reads and renames need a pet: until the first is acknowledged, every turn creates.
    const [operation, replayable, send] = requests[known === undefined ? 2 : turn % 4] as (typeof requests)[0];
    const sentAt = Date.now();
    const done = send().then(
      (answer) => {
        // A success is a 2xx the contract declares for the operation (the violation check says which).
        const succeeded = answer.status >= 200 && answer.status < 300;
        const failure = answer.violation ?? (succeeded ? undefined : `${answer.status} ${answer.body}`);
        this.outcomes.push({ operation, replayable, sentAt, answeredAt: Date.now(), status: answer.status, failure });
        if (failure === undefined && operation === 'createPet') this.created.push(JSON.parse(answer.body) as Pet);
      },
      (error: unknown) => {
        this.outcomes.push({ operation, replayable, sentAt, answeredAt: Date.now(), failure: String(error) });
      },
    );
    this.pending.add(done);
    void done.finally(() => this.pending.delete(done));
  }
}

/** Every pet, page by page through the balancer. */
export async function listAll(call: Client): Promise<Map<number, Pet>> {
  const pets = new Map<number, Pet>();
  let path: string | undefined = '/pets?limit=100';
  while (path !== undefined) {
    const page = await call('GET', path);
    if (page.status !== 200 || page.violation !== undefined) throw new Error(`listing: ${page.status} ${page.body}`);
    for (const pet of JSON.parse(page.body) as Pet[]) pets.set(pet.id, pet);
    path = /^<\/v1([^>]+)>; rel="next"$/.exec(String(page.headers.link ?? ''))?.[1];
  }
  return pets;
}

/** The pets `load` was answered 201 for that the deployment does not have. */
export async function lostPets(call: Client, load: SteadyLoad): Promise<Pet[]> {
  const stored = await listAll(call);
  return load.created.filter((pet) => !stored.has(pet.id));
}

export function summary(outcomes: Outcome[]): string {
  const counts = new Map<string, number>();
  for (const { operation } of outcomes) counts.set(operation, (counts.get(operation) ?? 0) + 1);
  return [...counts].map(([operation, count]) => `${count} ${operation}`).join(', ');
}
