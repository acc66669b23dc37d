import { statSync } from 'node:fs';
import Database from 'better-sqlite3';
import t from 'tap';
import type { Pet } from '../src/storage/types.js';
import { conformingFetch, startApi } from './helpers/api.js';
import { backend, newDatabase } from './helpers/backend.js';
import { databaseWithKey, startServerProcess } from './helpers/process.js';

t.test('every pet whose 201 arrived survives a SIGKILL mid-stream', async (t) => {
  const databaseUrl = await newDatabase(t);
  const key = await databaseWithKey(databaseUrl);
  const env = { DATABASE_URL: databaseUrl, RATE_LIMIT_PER_MINUTE: '0' };
  const server = await startServerProcess(t, env);
  const auth = { authorization: `Bearer ${key}` };

  const acknowledged: Pet[] = [];
  let sent = 0;
  const worker = async (lane: number) => {
    // Stop once the process is gone: requests in flight then fail, which is the point.
    while (sent < 5000) {
      sent += 1;
      const body = { name: `crash ${lane}-${sent} ✓`, categoryId: 1 + (sent % 7) };
      try {
        const response = await fetch(`${server.baseUrl}/pets`, {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        if (response.status !== 201) throw new Error(`unexpected ${response.status}`);
        acknowledged.push((await response.json()) as Pet);
      } catch {
        return;
      }
    }
  };
  const lanes = Array.from({ length: 16 }, (_, lane) => worker(lane));
  while (acknowledged.length < 300) await new Promise((resolve) => setTimeout(resolve, 5));
  server.child.kill('SIGKILL');
  await Promise.all(lanes);
  t.ok(acknowledged.length >= 300, `${acknowledged.length} creates acknowledged before the kill`);

  const restarted = await startServerProcess(t, env);
  const stored = new Map<number, Pet>();
  let url: string | undefined = `${restarted.baseUrl}/pets?limit=100`;
  while (url !== undefined) {
    const page = await conformingFetch(new Request(url, { headers: auth }));
    for (const pet of (await page.json()) as Pet[]) stored.set(pet.id, pet);
    const next = /^<([^>]+)>; rel="next"$/.exec(page.headers.get('link') ?? '')?.[1];
    url = next === undefined ? undefined : new URL(next, restarted.baseUrl).href;
  }
  const missing = acknowledged.filter((pet) => JSON.stringify(stored.get(pet.id)) !== JSON.stringify(pet));
  t.same(missing, [], 'every acknowledged pet is there, intact');

  if (backend === 'sqlite') {
    const db = new Database(databaseUrl, { readonly: true });
    t.teardown(() => db.close());
    t.equal(db.pragma('integrity_check', { simple: true }), 'ok');
  }
  await restarted.stop();
});

const onPostgres = backend === 'postgres' && 'PostgreSQL keeps its WAL bounded itself';
t.test(
  'SQLite: the WAL is checkpointed under a stream of creates, not left to grow',
  { skip: onPostgres },
  async (t) => {
    const api = await startApi(t, { rateLimit: { perMinute: 0, authFailuresPerMinute: 0 } });
    // A create appends ~3 pages (13 KB) to the WAL: 1,500 of them unchecked would leave ~19 MB.
    const statuses = new Set<number>();
    for (let i = 0; i < 1500; i += 1) {
      const created = await api.request({
        method: 'POST',
        url: '/v1/pets',
        headers: { ...api.auth, 'content-type': 'application/json' },
        payload: { name: `wal ${i}`, categoryId: 1 },
      });
      statuses.add(created.statusCode);
    }
    t.same([...statuses], [201], 'every create made its pet');
    const walBytes = statSync(`${api.databaseUrl}-wal`).size;
    // SQLite checkpoints at 1,000 pages (4 MB) and writes the WAL again from its start.
    t.ok(walBytes < 6 * 1024 * 1024, `the WAL holds ${(walBytes / 1024 / 1024).toFixed(1)} MB after 1,500 creates`);
  },
);
