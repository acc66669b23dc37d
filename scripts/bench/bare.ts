/**
 * The bench's bare reference: the measured operations with nothing but the interface's work, in
 * plain fastify on the project's database (DATABASE_URL: a SQLite file or postgres://): a
 * constant-time check of one key (BARE_API_KEY), the project's SQL, JSON in and out through
 * fastify's own schemas. No request id, log, metrics, limits, ETag or outbox: what the project
 * costs above this is what its features cost (BENCHMARKS.md).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import Database from 'better-sqlite3';
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import pg from 'pg';

interface Pet {
  id: number;
  name: string;
  categoryId: number;
  status: string;
}
type Row = Pet & { version: number };

const COLUMNS = 'id, name, category_id AS "categoryId", status';
const url = process.env.DATABASE_URL ?? '';
const keyHash = createHash('sha256')
  .update(process.env.BARE_API_KEY ?? '')
  .digest();

/** The three statements, on SQLite or PostgreSQL, as the project's storage writes them. */
interface Queries {
  list(status: string | undefined, afterId: number, limit: number): Promise<Pet[]>;
  get(id: number): Promise<Row | undefined>;
  create(name: string, categoryId: number, status: string): Promise<Row>;
}

function sqlite(file: string): Queries {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  // `LIMIT ? + 0`, as the project's storage writes it: `LIMIT ?` is prepared again on every run.
  const all = db.prepare<[number, number], Pet>(`SELECT ${COLUMNS} FROM pets WHERE id > ? ORDER BY id LIMIT ? + 0`);
  const byStatus = db.prepare<[string, number, number], Pet>(
    `SELECT ${COLUMNS} FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ? + 0`,
  );
  const byId = db.prepare<[number], Row>(`SELECT ${COLUMNS}, version FROM pets WHERE id = ?`);
  const insert = db.prepare<[string, number, string], Row>(
    `INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?) RETURNING ${COLUMNS}, version`,
  );
  return {
    list: async (status, afterId, limit) =>
      status === undefined ? all.all(afterId, limit) : byStatus.all(status, afterId, limit),
    get: async (id) => byId.get(id),
    // Run to its end, not .get(): better-sqlite3 resets a statement after the row get() reads, so an
    // INSERT ... RETURNING outside a transaction never reaches SQLite's commit hook, and the WAL is
    // never checkpointed (it grew 13 KB a create, 260 MB in 20,000).
    create: async (...values) => insert.all(...values)[0] as Row,
  };
}

/**
 * Named statements, as a node-postgres server tuned for speed prepares them (issue 56): unnamed,
 * each query is parsed and planned anew, and the bare server had flattered the project's reads.
 */
function postgres(connectionString: string): Queries {
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
    `INSERT INTO pets (name, category_id, status) VALUES ($1, $2, $3) RETURNING ${COLUMNS}, version`,
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

const error = (reply: FastifyReply, status: number, code: string, message: string) =>
  reply.code(status).send({ code, message, status });

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
const pet = {
  type: 'object',
  required: ['id', 'name', 'categoryId', 'status'],
  properties: { id, name: { type: 'string' }, categoryId: id, status },
};
const problem = {
  type: 'object',
  properties: { code: { type: 'string' }, message: { type: 'string' }, status: { type: 'integer' } },
};

app.get<{ Querystring: { limit: number; status?: string; cursor?: string } }>(
  '/v1/pets',
  {
    schema: {
      querystring: {
        type: 'object',
        properties: {
          limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
          status,
          cursor: { type: 'string', pattern: '^[A-Za-z0-9_-]{1,64}$' },
        },
      },
      response: { 200: { type: 'array', items: pet }, '4xx': problem },
    },
  },
  async (request, reply) => {
    const { limit, status, cursor } = request.query;
    const afterId = cursor === undefined ? 0 : Number(Buffer.from(cursor, 'base64url').toString().slice(3));
    // One row more than asked tells whether a next page follows, as the project's query does.
    const rows = await queries.list(status, afterId, limit + 1);
    const last = rows[limit - 1];
    if (rows.length <= limit || last === undefined) return rows;
    const next = Buffer.from(`v1:${last.id}`).toString('base64url');
    const filter = status === undefined ? '' : `&status=${status}`;
    return reply
      .header('link', `</v1/pets?limit=${limit}${filter}&cursor=${next}>; rel="next"`)
      .send(rows.slice(0, limit));
  },
);

app.get<{ Params: { petId: number } }>(
  '/v1/pets/:petId',
  { schema: { params: { type: 'object', properties: { petId: id } }, response: { 200: pet, '4xx': problem } } },
  async (request, reply) => {
    const found = await queries.get(request.params.petId);
    return found ?? error(reply, 404, 'not_found', `No pet with id ${request.params.petId}`);
  },
);

app.post<{ Body: { name: string; categoryId: number; status?: string } }>(
  '/v1/pets',
  {
    schema: {
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
    return reply.code(201).send(await queries.create(name, categoryId, status));
  },
);

await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT ?? '3000') });
