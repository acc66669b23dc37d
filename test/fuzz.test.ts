/**
 * Hostile input, generated from the contract (issue 6, part 5).
 *
 * Property-based tests (fast-check) that send thousands of requests built from openapi.yaml:
 * valid ones, and ones with one field, parameter, header or byte broken. The generators
 * (test/helpers/requests.ts) walk the dereferenced contract, so a new field or parameter is fuzzed
 * without a change here. Every answer must be a status the contract declares for the operation,
 * with a body that validates (api.request checks both), never a 5xx; a rejected request must leave
 * the database as it was, an accepted create must store exactly what was sent, and an accepted
 * request of a safe method (GET) must change nothing.
 *
 * Running it (after `npx tsc -p tsconfig.json`):
 *   npx tap --disable-coverage dist/test/fuzz.test.js
 *       what CI runs (npm test): the fixed seed FUZZ_SEED=60005 and FUZZ_RUNS=40 runs per operation
 *       and property (a quarter of that over raw sockets). Each operation is fuzzed on its own with
 *       that seed, so adding an operation adds its own requests and changes nothing another
 *       operation is sent.
 *   FUZZ_SEED=12345 npx tap --disable-coverage dist/test/fuzz.test.js
 *       another seed; a failure prints the counterexample and the seed and path that replay it.
 *   FUZZ_RUNS=5000 npx tap --disable-coverage --timeout=0 dist/test/fuzz.test.js
 *       a long run on demand (--timeout=0 lifts tap's 120 s limit per test file).
 *
 * Its first runs found nine server defects, each now fixed and kept fixed by this test: a NUL or a
 * lone surrogate in a name, bytes that are not UTF-8, repeated JSON keys, integers past 2^53, a
 * URL the router cannot decode answered before authentication, bodies read before a 404/405, a
 * missing or repeated Host (and other single-value headers).
 */
import { connect } from 'node:net';
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import t from 'tap';
import { BODY_LIMIT } from '../src/app.js';
import type { ErrorBody } from '../src/domain/errors.js';
import { parseNetworks } from '../src/events/address-guard.js';
import { DEFAULT_WEBHOOKS } from '../src/events/settings.js';
import { listen, startApi, type TapTest, type TestApi } from './helpers/api.js';
import { type DatabaseProbe, probeDatabase, type TableCounts } from './helpers/backend.js';
import { ContractViolation, findOperation } from './helpers/contract.js';
import {
  accepts,
  anyMethod,
  blames,
  describe,
  errorSchema,
  type Draft,
  type Fault,
  hasLoneSurrogate,
  invalidAuthorization,
  isObject,
  junkBody,
  mutatedRequest,
  nearbyPath,
  type Operation,
  operations,
  type RawMutation,
  rawFrom,
  rawMutation,
  type Rejection,
  rewriteFirstNumber,
  type Schema,
  schemaNames,
  printable,
  serialize,
  toInject,
  toJson,
  unhonouredKeywords,
  validAuthorization,
  validRequest,
  validValue,
  withDefaults,
} from './helpers/requests.js';

const SEED = Number(process.env.FUZZ_SEED ?? 60_005);
/** Runs per operation and property. */
const RUNS = Number(process.env.FUZZ_RUNS ?? 40);
/** Raw sockets are slower than inject: a quarter of the runs. */
const RAW_RUNS = Math.max(1, Math.round(RUNS / 4));

const IDEMPOTENCY_KEY = operations
  .flatMap((operation) => operation.parameters)
  .find((parameter) => parameter.in === 'header' && /idempotency/i.test(parameter.name))
  ?.name.toLowerCase();

/** The methods that change nothing (RFC 9110, section 9.2.1). */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE']);

/** How a request was sent: with a valid key, without one, to a wrong path or method, or as raw bytes. */
type Mode = 'authorized' | 'unauthorized' | 'route' | 'raw';

// ---------------------------------------------------------------------------------------------
// The database, observed read-only

/** Row counts of every table and the last id each handed out (`pets ids`). */
type Snapshot = TableCounts;

function changes(before: Snapshot, after: Snapshot): string {
  const names = [...new Set([...Object.keys(before), ...Object.keys(after)])];
  return names
    .filter((name) => before[name] !== after[name])
    .map((name) => `${name} ${before[name]} -> ${after[name]}`)
    .join(', ');
}

// ---------------------------------------------------------------------------------------------
// What a request must get

interface Verdict {
  accept: 'must' | 'may' | 'never';
  faults: Fault[];
}

/** The faults put into the draft, plus those only its size or its strings show. */
function verdictOf(draft: Draft): Verdict {
  const faults = [...draft.faults];
  const size = draft.body === undefined ? 0 : Buffer.byteLength(draft.body);
  if (size > BODY_LIMIT) faults.push({ what: `a ${size}-byte body`, rejections: [{ status: 413 }] });
  if (draft.operation.body !== undefined && hasLoneSurrogate(draft.sent)) {
    // Not a Unicode scalar value: rejecting it is as right as storing it exactly.
    faults.push({
      what: 'a lone surrogate in a string',
      mayBeAccepted: true,
      rejections: [{ status: 400, message: /^body\b/i }],
    });
  }
  const accept = faults.length === 0 ? 'must' : faults.every((fault) => fault.mayBeAccepted === true) ? 'may' : 'never';
  return { accept, faults };
}

/** Rejections of a valid request the schema cannot foresee: an absent resource, a cursor the server never issued. */
/**
 * What a well-formed request may still be refused for, by the state it meets: a path naming nothing
 * (404), a conflict with the current state the operation documents (409: a status move, an animal
 * not available), and a precondition it sent that no longer holds (412).
 */
function semanticRejections(draft: Draft): Rejection[] {
  const { parameters, documented } = draft.operation;
  return [
    ...(parameters.some((parameter) => parameter.in === 'path') ? [{ status: 404 }] : []),
    ...(documented.includes('409') ? [{ status: 409 }] : []),
    ...(documented.includes('412') && (draft.headers['if-match'] ?? draft.headers['if-none-match']) !== undefined
      ? [{ status: 412 }]
      : []),
    ...parameters
      .filter((parameter) => parameter.opaque)
      .map((parameter) => ({ status: 400, message: blames(parameter) })),
  ];
}

function fingerprint(draft: Draft): string {
  const value = withDefaults(draft.operation.body?.schema ?? {}, draft.sent);
  return JSON.stringify(
    isObject(value) ? Object.fromEntries(Object.entries(value).sort(([a], [b]) => a.localeCompare(b))) : value,
  );
}

interface Claim {
  fingerprint: string;
  created: unknown;
}

// ---------------------------------------------------------------------------------------------
// The fuzzer: sends, judges, tolerates known defects, counts

interface Injected {
  method: string;
  url: string;
  headers: Record<string, string>;
  payload?: string | Buffer;
}

class Fuzzer {
  private requests = 0;
  private readonly statuses = new Map<string, number>();
  /** Idempotency keys the server has accepted, with the body and the answer. */
  private readonly claims = new Map<string, Claim>();

  private constructor(
    readonly api: TestApi,
    private readonly tables: DatabaseProbe,
  ) {}

  static async start(t: TapTest): Promise<Fuzzer> {
    const api = await startApi(t, {
      rateLimit: { perMinute: 0, authFailuresPerMinute: 0 },
      // The valid webhook URLs it makes are on loopback (test/helpers/requests.ts).
      webhooks: { ...DEFAULT_WEBHOOKS, allowedNetworks: parseNetworks('loopback') },
    });
    return new Fuzzer(api, await probeDatabase(t, api.databaseUrl));
  }

  /** Sends a draft (or a route mutation) through inject and judges the answer. */
  async send(mode: Exclude<Mode, 'raw'>, options: Injected, draft?: Draft): Promise<void> {
    const before = await this.tables.snapshot();
    let status: number | undefined;
    let problem: string | undefined;
    try {
      const response = await this.api.request(options);
      status = response.statusCode;
      problem = await this.judge(mode, draft, response, before);
    } catch (error) {
      if (!(error instanceof ContractViolation)) throw error;
      problem = error.message;
      status = Number(/ -> (\d{3})\b/.exec(problem)?.[1] ?? Number.NaN) || undefined;
    }
    this.count(status);
    if (problem !== undefined) {
      const request =
        draft === undefined
          ? printable(
              `${options.method} ${options.url} ${JSON.stringify(options.headers)} ${toJson(options.payload).slice(0, 200)}`,
            )
          : describe(draft, options.headers.authorization, this.api.key);
      throw new Error(`${problem}\n  request: ${request}`);
    }
  }

  private async judge(
    mode: Mode,
    draft: Draft | undefined,
    response: Awaited<ReturnType<TestApi['request']>>,
    before: Snapshot,
  ): Promise<string | undefined> {
    const status = response.statusCode;
    if (status >= 500) return `answered ${status}: ${response.body}`;
    const after = await this.tables.snapshot();
    const unchanged = isDeepStrictEqual(before, after);
    if (status >= 400) {
      if (!unchanged) return `a ${status} changed the database: ${changes(before, after)}`;
      const message = response.body === '' ? '' : response.json<ErrorBody>().message; // HEAD has no body
      if (mode === 'unauthorized') {
        if (status !== 401) return `answered ${status} "${message}" without a valid key: 401 expected`;
        const words = new Set(message.toLowerCase().split(/[^a-z0-9-]+/));
        const named = schemaNames.find((name) => words.has(name.toLowerCase()));
        return named === undefined ? undefined : `the 401 names "${named}": it should reveal nothing of the schema`;
      }
      return mode === 'authorized' && draft !== undefined ? this.rejectionProblem(draft, status, message) : undefined;
    }
    if (mode !== 'authorized' || draft === undefined) return `answered ${status} to a ${mode} request`;
    const verdict = verdictOf(draft);
    if (verdict.accept === 'never')
      return `answered ${status} although: ${verdict.faults.map((fault) => fault.what).join('; ')}`;
    if (draft.operation.creates) return this.checkCreated(draft, response, before, after);
    if (SAFE_METHODS.has(draft.operation.method)) {
      return unchanged
        ? undefined
        : `a ${status} of ${draft.operation.id} changed the database: ${changes(before, after)}`;
    }
    // An update or a delete changes rows, but adds none and hands out no id.
    const grown = Object.keys(after).filter((name) => (after[name] ?? 0) > (before[name] ?? 0));
    return grown.length === 0
      ? undefined
      : `a ${status} of ${draft.operation.id}, which creates nothing, grew ${grown.join(', ')}: ${changes(before, after)}`;
  }

  private conflicts(draft: Draft): boolean {
    const key = IDEMPOTENCY_KEY === undefined ? undefined : draft.headers[IDEMPOTENCY_KEY];
    const claim = key === undefined ? undefined : this.claims.get(key);
    return draft.operation.creates && claim !== undefined && claim.fingerprint !== fingerprint(draft);
  }

  private rejectionProblem(draft: Draft, status: number, message: string): string | undefined {
    const verdict = verdictOf(draft);
    const allowed: Rejection[] = [
      ...verdict.faults.flatMap((fault) => fault.rejections),
      ...(verdict.accept === 'never' ? [] : semanticRejections(draft)),
      ...(verdict.accept !== 'never' && this.conflicts(draft) ? [{ status: 422 }] : []),
    ];
    if (allowed.some((rejection) => rejection.status === status && (rejection.message?.test(message) ?? true)))
      return undefined;
    const expected =
      allowed.length === 0
        ? 'a success'
        : allowed
            .map((rejection) => `${rejection.status}${rejection.message === undefined ? '' : ` ${rejection.message}`}`)
            .join(' or ');
    return `answered ${status} "${message}"; expected ${expected}`;
  }

  /** A 201 stores exactly what was sent (defaults filled in), once; a retry replays it. */
  private async checkCreated(
    draft: Draft,
    response: Awaited<ReturnType<TestApi['request']>>,
    before: Snapshot,
    after: Snapshot,
  ): Promise<string | undefined> {
    const created = response.json<Record<string, unknown>>();
    const key = IDEMPOTENCY_KEY === undefined ? undefined : draft.headers[IDEMPOTENCY_KEY];
    const claim = key === undefined ? undefined : this.claims.get(key);
    if (claim !== undefined) {
      if (claim.fingerprint !== fingerprint(draft))
        return `a 201 for Idempotency-Key ${JSON.stringify(key)} reused with another body: 422 expected`;
      if (response.headers['idempotent-replayed'] !== 'true') return 'a retry was not marked Idempotent-Replayed: true';
      if (!isDeepStrictEqual(created, claim.created))
        return `the retry answered ${JSON.stringify(created)}, not the original ${JSON.stringify(claim.created)}`;
      return isDeepStrictEqual(before, after) ? undefined : `a retry changed the database: ${changes(before, after)}`;
    }
    if (response.headers['idempotent-replayed'] !== undefined) return 'a first create was marked Idempotent-Replayed';
    const expected = withDefaults(draft.operation.body?.schema ?? {}, draft.sent) as Record<string, unknown>;
    const differs = Object.keys(expected).filter((name) => !isDeepStrictEqual(created[name], expected[name]));
    if (differs.length > 0)
      return `the 201 holds ${JSON.stringify(created)}, but ${JSON.stringify(expected)} was sent (${differs.join(', ')} differ)`;
    const handedOut = Object.keys(after).filter((name) => name.endsWith(' ids') && after[name] !== before[name]);
    if (handedOut.length !== 1 || after[handedOut[0] ?? ''] !== created.id)
      return `a create changed the database by ${changes(before, after)}, not one new row with id ${String(created.id)}`;
    const location = response.headers.location?.toString() ?? '';
    if (!location.endsWith(`/${String(created.id)}`))
      return `Location ${location} does not name the new ${handedOut[0]}`;
    // What the Location answers now: every field it shows is what the 201 said (a secret is shown once).
    const stored = (await this.api.request({ method: 'GET', url: location, headers: this.api.auth })).json<object>();
    const differing = Object.entries(stored).filter(([name, value]) => !isDeepStrictEqual(value, created[name]));
    if (differing.length > 0)
      return `the database holds ${JSON.stringify(stored)}, the 201 said ${JSON.stringify(created)}`;
    if (key !== undefined) this.claims.set(key, { fingerprint: fingerprint(draft), created });
    return undefined;
  }

  /** Sends raw bytes over a real socket: the answer must be a declared 4xx with an Error body. */
  async sendRaw(port: number, draft: Draft, mutation: RawMutation): Promise<void> {
    const request = mutation.apply(rawFrom(draft, this.api.auth.authorization));
    const before = await this.tables.snapshot();
    const response = await exchange(port, serialize(request));
    this.count(response.status);
    const problem = await this.judgeRaw(request, mutation, response, before);
    if (problem !== undefined) {
      const shown = serialize(request).toString('latin1').split(this.api.key).join('<key>');
      throw new Error(
        `${problem}\n  request: ${printable(`${mutation.what}: ${JSON.stringify(shown.slice(0, 600))}`)}`,
      );
    }
  }

  private async judgeRaw(
    request: ReturnType<typeof rawFrom>,
    mutation: RawMutation,
    response: RawResponse,
    before: Snapshot,
  ): Promise<string | undefined> {
    const { status } = response;
    if (status === undefined) return `no HTTP answer: ${JSON.stringify(response.text.slice(0, 200))}`;
    if (status < 300 && mutation.mayBeAccepted) return undefined;
    const after = await this.tables.snapshot();
    if (!isDeepStrictEqual(before, after)) return `a ${status} changed the database: ${changes(before, after)}`;
    if (status < 400 || status >= 500) return `answered ${status}: a 4xx expected`;
    const { operation, pathKnown } = findOperation(request.method.trim(), request.target.toString('latin1'));
    const declared =
      operation === undefined ? [pathKnown ? 405 : 404] : Object.keys({ ...operation.responses }).map(Number);
    if (status !== 400 && !declared.includes(status))
      return `answered ${status}, which is not declared (${declared.join(', ')})`;
    let body: unknown;
    try {
      body = JSON.parse(response.body);
    } catch {
      body = undefined;
    }
    if (
      !/^application\/json\b/.test(response.headers['content-type'] ?? '') ||
      !accepts(errorSchema, body) ||
      (body as ErrorBody).status !== status
    ) {
      return `answered ${status} with ${JSON.stringify(response.body.slice(0, 200))} (${response.headers['content-type'] ?? 'no content-type'}): not an Error body`;
    }
    return undefined;
  }

  private count(status: number | undefined): void {
    this.requests += 1;
    const name = status === undefined ? 'none' : String(status);
    this.statuses.set(name, (this.statuses.get(name) ?? 0) + 1);
  }

  report(t: TapTest): void {
    const statuses = [...this.statuses]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([status, count]) => `${status}: ${count}`);
    t.comment(`${this.requests} requests (${statuses.join(', ')})`);
  }
}

interface RawResponse {
  status: number | undefined;
  headers: Record<string, string>;
  body: string;
  text: string;
}

/**
 * Writes bytes on a fresh connection and reads until the server closes it (requests say Connection:
 * close). The client's end stays open: an instance ends a half-closed connection at once, whatever
 * it was answering, and answering such clients is the balancer's job (docs/deploy.md).
 */
function exchange(port: number, bytes: Buffer): Promise<RawResponse> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const socket = connect(port, '127.0.0.1', () => socket.write(bytes));
    socket.setTimeout(5_000, () => socket.destroy());
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(parseResponse(Buffer.concat(chunks).toString('latin1'))));
  });
}

function parseResponse(text: string): RawResponse {
  const end = text.indexOf('\r\n\r\n');
  const [statusLine = '', ...lines] = text.slice(0, end === -1 ? text.length : end).split('\r\n');
  const headers = Object.fromEntries(
    lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]),
  );
  let body = end === -1 ? '' : text.slice(end + 4);
  if (/chunked/i.test(headers['transfer-encoding'] ?? '')) body = dechunk(body);
  else if (headers['content-length'] !== undefined) body = body.slice(0, Number(headers['content-length']));
  const status = /^HTTP\/1\.[01] (\d{3}) /.exec(statusLine)?.[1];
  return {
    status: status === undefined ? undefined : Number(status),
    headers,
    body: Buffer.from(body, 'latin1').toString('utf8'),
    text,
  };
}

function dechunk(body: string): string {
  let out = '';
  let rest = body;
  for (;;) {
    const lineEnd = rest.indexOf('\r\n');
    const size = parseInt(rest.slice(0, lineEnd), 16);
    if (lineEnd === -1 || !(size > 0)) return out;
    out += rest.slice(lineEnd + 2, lineEnd + 2 + size);
    rest = rest.slice(lineEnd + 4 + size);
  }
}

// ---------------------------------------------------------------------------------------------
// The properties

async function check<Ts extends unknown[]>(
  t: TapTest,
  fuzzer: Fuzzer,
  property: fc.IAsyncProperty<Ts>,
  numRuns: number,
): Promise<void> {
  await fc.assert(property, { seed: SEED, numRuns });
  fuzzer.report(t);
  t.pass(`${numRuns} runs, seed ${SEED}`);
}

/**
 * Checks a property of each operation in turn, each with the fixed seed: what one operation is
 * sent does not depend on how many others the contract has. A failure names the operation.
 */
async function checkEach<Ts extends unknown[]>(
  t: TapTest,
  fuzzer: Fuzzer,
  propertyOf: (operation: Operation) => fc.IAsyncProperty<Ts> | undefined,
  numRuns = RUNS,
): Promise<void> {
  let checked = 0;
  for (const operation of operations) {
    const property = propertyOf(operation);
    if (property === undefined) continue;
    try {
      await fc.assert(property, { seed: SEED, numRuns });
    } catch (error) {
      throw new Error(`${operation.id}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    }
    checked += 1;
  }
  fuzzer.report(t);
  t.pass(`${numRuns} runs for each of ${checked} operations, seed ${SEED}`);
}

t.test("valid values honour every keyword of the contract's request schemas", async (t) => {
  const schemas = operations.flatMap(({ id, parameters, body }) => [
    ...parameters.map(({ name, schema }): [string, Schema] => [`${id} ${name}`, schema]),
    ...(body === undefined ? [] : [[`${id} body`, body.schema] as [string, Schema]]),
  ]);
  t.ok(schemas.length > 0, 'the contract has request schemas');
  t.same(
    schemas.flatMap(([where, schema]) => unhonouredKeywords(schema, where)),
    [],
    'a keyword listed here is one the generator ignores: teach validValue it',
  );
  t.same(unhonouredKeywords({ type: 'string', format: 'email' }, 'x'), ['x/format: email'], 'the check can fail');
});

t.test('a body rewritten "for a number" changes a JSON number, never digits inside a string', async (t) => {
  const url = '{"url":"http://127.0.0.1:4000/a\\"1","retries":12,"ratio":-0.5e3}';
  t.equal(
    rewriteFirstNumber(url, () => 'NaN'),
    '{"url":"http://127.0.0.1:4000/a\\"1","retries":NaN,"ratio":-0.5e3}',
  );
  t.equal(
    rewriteFirstNumber('[-0.5e3]', (number) => number.replace(/[0-9]+/, '0x$&')),
    '[-0x0.5e3]',
  );
  t.equal(
    rewriteFirstNumber('{"port":"4000"}', () => 'NaN'),
    '{"port":"4000"}',
    'no number: nothing to rewrite',
  );
  const strings = fc.dictionary(fc.string(), fc.string()).map((value) => JSON.stringify(value));
  fc.assert(
    fc.property(strings, (text) => rewriteFirstNumber(text, () => 'NaN') === text),
    { seed: SEED },
  );
  const withNumber = fc
    .tuple(fc.dictionary(fc.string(), fc.string()), fc.double({ noNaN: true, noDefaultInfinity: true }))
    .map((pair) => JSON.stringify(pair));
  fc.assert(
    fc.property(withNumber, (text) => {
      // The number is the last value: the text after the last comma.
      return rewriteFirstNumber(text, () => 'NaN') === text.replace(/[^,]*\]$/, 'NaN]');
    }),
    { seed: SEED },
  );
  t.pass('strings are left alone; the number is the one rewritten');
});

t.test('valid objects honour minProperties, maxProperties and dependentRequired', async (t) => {
  const properties: Record<string, Schema> = {
    name: { type: 'string', minLength: 1, maxLength: 100 },
    categoryId: { type: 'integer', minimum: 1 },
    status: { type: 'string', enum: ['available', 'pending', 'sold'] },
  };
  const object = { type: 'object', additionalProperties: false, properties } as Schema;
  const cases: [string, Schema, number[]][] = [
    ['a merge patch (minProperties: 1)', { ...object, minProperties: 1 }, [1, 2, 3]],
    ['maxProperties: 1', { ...object, maxProperties: 1 }, [0, 1]],
    [
      'status requires name',
      { ...object, required: ['categoryId'], dependentRequired: { status: ['name'] } },
      [1, 2, 3],
    ],
  ];
  for (const [what, schema, sizes] of cases) {
    const values = fc.sample(validValue(schema), { seed: SEED, numRuns: 300 });
    const refused = values.filter((value) => !accepts(schema, value));
    t.same(refused.slice(0, 3), [], `${what}: every value is valid (${refused.length} of ${values.length} refused)`);
    const seen = [...new Set(values.map((value) => Object.keys(value as object).length))].sort();
    t.same(seen, sizes, `${what}: every number of properties it allows`);
  }
});

t.test('valid requests built from the contract succeed, conform, and store exactly what was sent', async (t) => {
  const fuzzer = await Fuzzer.start(t);
  await checkEach(t, fuzzer, (operation) =>
    fc.asyncProperty(validRequest(operation), validAuthorization(fuzzer.api.key), async (draft, authorization) => {
      await fuzzer.send('authorized', toInject(draft, authorization), draft);
    }),
  );
});

t.test('a request with one part broken is a declared 4xx naming that part, and changes nothing', async (t) => {
  const fuzzer = await Fuzzer.start(t);
  await checkEach(t, fuzzer, (operation) =>
    fc.asyncProperty(mutatedRequest(operation, BODY_LIMIT), async (draft) => {
      await fuzzer.send('authorized', toInject(draft, fuzzer.api.auth.authorization), draft);
    }),
  );
});

t.test('without a valid key every request is a 401 that reveals nothing, whatever else is wrong with it', async (t) => {
  const fuzzer = await Fuzzer.start(t);
  await checkEach(t, fuzzer, (operation) => {
    if (!operation.secured) return undefined;
    // An empty path segment (`/v1/pets/`) names no operation: a 404 before authentication, as any unknown path.
    const request = fc
      .oneof(validRequest(operation), mutatedRequest(operation, BODY_LIMIT))
      .filter((draft) => Object.values(draft.path).every((wire) => wire !== ''));
    return fc.asyncProperty(request, invalidAuthorization(fuzzer.api.key), async (draft, authorization) => {
      await fuzzer.send('unauthorized', toInject(draft, authorization), draft);
    });
  });
});

t.test('unknown paths are 404 and other methods on known paths 405, with or without a key or a body', async (t) => {
  const fuzzer = await Fuzzer.start(t);
  const route = fc
    .tuple(anyMethod, nearbyPath)
    .filter(([method, path]) => findOperation(method, path).operation === undefined);
  const property = fc.asyncProperty(
    route,
    fc.option(validAuthorization(fuzzer.api.key), { nil: undefined }),
    junkBody(BODY_LIMIT),
    async ([method, path], authorization, body) => {
      const headers: Record<string, string> = {
        ...(authorization === undefined ? {} : { authorization }),
        ...(body === undefined ? {} : { 'content-type': body.contentType }),
      };
      await fuzzer.send('route', {
        method,
        url: path,
        headers,
        ...(body === undefined ? {} : { payload: body.payload }),
      });
    },
  );
  // Routes are not one operation's: as many runs as all of them together.
  await check(t, fuzzer, property, RUNS * operations.length);
});

t.test('bytes inject cannot send, over a real socket, get a declared 4xx with an Error body', async (t) => {
  const fuzzer = await Fuzzer.start(t);
  const { origin } = await listen(t, fuzzer.api);
  const port = Number(new URL(origin).port);
  await checkEach(
    t,
    fuzzer,
    (operation) =>
      fc.asyncProperty(
        validRequest(operation).chain((draft) => fc.tuple(fc.constant(draft), rawMutation(draft.body !== undefined))),
        async ([draft, mutation]) => {
          await fuzzer.sendRaw(port, draft, mutation);
        },
      ),
    RAW_RUNS,
  );
});
