/**
 * The bench's bare reference: the measured operations of the newest version (/v2) with nothing but
 * the interface's work, in plain fastify on the project's database (DATABASE_URL: a SQLite file or
 * postgres://): a constant-time check of one key (BARE_API_KEY), the project's SQL, JSON in and out
 * through fastify's own schemas, in the shapes the contract gives (a page as an array or an
 * envelope, an error as an Error or a problem detail: shapes.ts reads which). No request id, log,
 * metrics, limits, ETag, idempotency claim (the key is required, not kept) or outbox: what the
 * project costs above this is what its features cost (BENCHMARKS.md).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import Database from 'better-sqlite3';
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import pg from 'pg';
import { contractShapes } from './shapes.js';

interface Pet {
  id: number;
  name: string;
  categoryId: number;
  status: string;
  createdAt: string;
  updatedAt: string;
}
type Row = Pet & { version: number };

const FIELDS = 'id, name, category_id AS "categoryId", status';
const SQLITE_COLUMNS = `${FIELDS}, created_at AS "createdAt", updated_at AS "updatedAt"`;
/** As the project's PostgreSQL storage formats a timestamp: RFC 3339, UTC, milliseconds. */
const TIMESTAMP = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
const POSTGRES_COLUMNS = `${FIELDS}, ${TIMESTAMP('created_at')} AS "createdAt", ${TIMESTAMP('updated_at')} AS "updatedAt"`;
const shapes = contractShapes();
const url = process.env.DATABASE_URL ?? '';
const keyHash = createHash('sha256')
  .update(process.env.BARE_API_KEY ?? '')
  .digest();

/** The three statements, on SQLite or PostgreSQL, as the project's storage writes them. */
interface Queries {
  list(status: string | undefined, afterId: number, limit: number): Promise<Pet[]>;
  get(id: number): Promise<Row | undefined>;
  /** `at`: the creation time, RFC 3339 (the project's repository writes it from its clock). */
  create(name: string, categoryId: number, status: string, at: string): Promise<Row>;
}

function sqlite(file: string): Queries {
  const COLUMNS = SQLITE_COLUMNS;
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  // `LIMIT ? + 0`, as the project's storage writes it: `LIMIT ?` is prepared again on every run.
  const all = db.prepare<[number, number], Pet>(`SELECT ${COLUMNS} FROM pets WHERE id > ? ORDER BY id LIMIT ? + 0`);
  const byStatus = db.prepare<[string, number, number], Pet>(
    `SELECT ${COLUMNS} FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ? + 0`,
  );
  const byId = db.prepare<[number], Row>(`SELECT ${COLUMNS}, version FROM pets WHERE id = ?`);
  const insert = db.prepare<[string, number, string, string, string], Row>(
    `INSERT INTO pets (name, category_id, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?) RETURNING ${COLUMNS}, version`,
  );
  return {
    list: async (status, afterId, limit) =>
      status === undefined ? all.all(afterId, limit) : byStatus.all(status, afterId, limit),
    get: async (id) => byId.get(id),
    // Run to its end, not .get(): better-sqlite3 resets a statement after the row get() reads, so an
    // INSERT ... RETURNING outside a transaction never reaches SQLite's commit hook, and the WAL is
    // never checkpointed (it grew 13 KB a create, 260 MB in 20,000).
    create: async (name, categoryId, status, at) => insert.all(name, categoryId, status, at, at)[0] as Row,
  };
}

/**
 * Named statements, as a node-postgres server tuned for speed prepares them (issue 56): unnamed,
 * each query is parsed and planned anew, and the bare server had flattered the project's reads.
 */
function postgres(connectionString: string): Queries {
  const COLUMNS = POSTGRES_COLUMNS;
  // bigint columns as numbers, as the project reads them.
  pg.types.setTypeParser(pg.types.builtins.INT8, Number);
  const pool = new pg.Pool({ connectionString, max: 10 });
  const statement = (name: string, text: string) => async (values: unknown[]) =>
    (await pool.query<Row>({ name, text, values })).rows;
  const all = statement('all', `SELECT ${COLUMNS} FROM pets WHERE id > $1 ORDER BY id LIMIT $2`);
  const byStatus = statement(
    'by-status',
    `SELECT ${COLUMNS} FROM pets WHERE status = $1 AND id > $2 ORDER BY id LIMIT $3`,
  );
  const byId = statement('by-id', `SELECT ${COLUMNS}, version FROM pets WHERE id = $1`);
  const insert = statement(
    'insert',
    `INSERT INTO pets (name, category_id, status, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)
     RETURNING ${COLUMNS}, version`,
  );
  return {
    list: (status, afterId, limit) =>
      status === undefined ? all([afterId, limit]) : byStatus([status, afterId, limit]),
    get: async (id) => (await byId([id]))[0],
    create: async (...values) => (await insert(values))[0] as Row,
  };
}

const queries = url.startsWith('postgres') ? postgres(url) : sqlite(url);
const app = Fastify({ bodyLimit: 16 * 1024 });

const TITLES: Record<string, string> = { unauthorized: 'Unauthorized', invalid_request: 'Invalid request' };

const error = (reply: FastifyReply, status: number, code: string, message: string) =>
  shapes.problem
    ? reply
        .code(status)
        .type('application/problem+json')
        .send({
          type: `https://petstore.example/problems/${code}`,
          title: TITLES[code] ?? code,
          status,
          detail: message,
          code,
        })
    : reply.code(status).send({ code, message, status });

function authenticate(request: FastifyRequest, reply: FastifyReply, done: () => void) {
  const token = /^Bearer (\S+)$/.exec(request.headers.authorization ?? '')?.[1];
  const hash = createHash('sha256')
    .update(token ?? '')
    .digest();
  if (token === undefined || !timingSafeEqual(hash, keyHash)) {
    void reply.header('www-authenticate', 'Bearer realm="petstore"');
    void error(reply, 401, 'unauthorized', 'Missing or invalid API key');
    return;
  }
  done();
}

app.setErrorHandler((failure: Error & { validation?: unknown }, _request, reply) =>
  error(reply, 400, 'invalid_request', failure.validation === undefined ? 'Bad request' : failure.message),
);
app.addHook('onRequest', authenticate);

const id = { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER };
const status = { type: 'string', enum: ['available', 'pending', 'sold'] };
const timestamp = { type: 'string' };
const pet = {
  type: 'object',
  required: ['id', 'name', 'categoryId', 'status', 'createdAt', 'updatedAt'],
  properties: { id, name: { type: 'string' }, categoryId: id, status, createdAt: timestamp, updatedAt: timestamp },
};
const text = { type: 'string' };
const problem = shapes.problem
  ? {
      type: 'object',
      properties: { type: text, title: text, status: { type: 'integer' }, detail: text, code: text },
    }
  : { type: 'object', properties: { code: text, message: text, status: { type: 'integer' } } };
const pets = { type: 'array', items: pet };
const page = shapes.envelope
  ? { type: 'object', properties: { data: pets, nextCursor: { type: ['string', 'null'] } } }
  : pets;
/** Comma-separated ids, as the contract's `id` filter (style form, not exploded). */
const ids = { type: 'string', pattern: '^[1-9][0-9]{0,15}(,[1-9][0-9]{0,15}){0,99}$' };

/** A page as the contract writes it: an envelope, or an array with `Link: rel="next"`. */
function sendPage(reply: FastifyReply, rows: Pet[], next: string | undefined) {
  if (shapes.envelope) return reply.send({ data: rows, nextCursor: next ?? null });
  return next === undefined ? reply.send(rows) : reply.header('link', `<${next}>; rel="next"`).send(rows);
}

app.get<{ Querystring: { limit: number; status?: string; cursor?: string; id?: string } }>(
  '/v2/pets',
  {
    schema: {
      querystring: {
        type: 'object',
        properties: {
          limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
          status,
          id: ids,
          cursor: { type: 'string', pattern: '^[A-Za-z0-9_-]{1,64}$' },
        },
      },
      response: { 200: page, '4xx': problem },
    },
  },
  async (request, reply) => {
    const { limit, status, cursor, id } = request.query;
    if (id !== undefined) {
      const found = await Promise.all(id.split(',').map((one) => queries.get(Number(one))));
      return sendPage(
        reply,
        found.filter((row) => row !== undefined),
        undefined,
      );
    }
    const afterId = cursor === undefined ? 0 : Number(Buffer.from(cursor, 'base64url').toString().slice(3));
    // One row more than asked tells whether a next page follows, as the project's query does.
    const rows = await queries.list(status, afterId, limit + 1);
    const last = rows[limit - 1];
    if (rows.length <= limit || last === undefined) return sendPage(reply, rows, undefined);
    const next = Buffer.from(`v2:${last.id}`).toString('base64url');
    const filter = status === undefined ? '' : `&status=${status}`;
    return sendPage(
      reply,
      rows.slice(0, limit),
      shapes.envelope ? next : `/v2/pets?limit=${limit}${filter}&cursor=${next}`,
    );
  },
);

app.post<{ Body: { name: string; categoryId: number; status?: string } }>(
  '/v2/pets',
  {
    schema: {
      headers: {
        type: 'object',
        required: ['idempotency-key'],
        properties: { 'idempotency-key': { type: 'string', minLength: 1, maxLength: 255 } },
      },
      body: {
        type: 'object',
        required: ['name', 'categoryId'],
        additionalProperties: false,
        properties: { name: { type: 'string', minLength: 1, maxLength: 100 }, categoryId: id, status },
      },
      response: { 201: pet, '4xx': problem },
    },
  },
  async (request, reply) => {
    const { name, categoryId, status = 'available' } = request.body;
    return reply.code(201).send(await queries.create(name, categoryId, status, new Date().toISOString()));
  },
);

await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT ?? '3000') });
