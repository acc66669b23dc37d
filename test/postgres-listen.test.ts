import pg from 'pg';
import t from 'tap';
import { openStorage } from '../src/storage/index.js';
import { sharedPostgres } from './helpers/postgres.js';

// Each instance LISTENs for other instances' changes (keys, events) on a connection of its own.
// When that connection fails, the operator is told once, not once a second while it is retried.

async function terminate(url: string, applicationName: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rowCount } = await client.query(
      'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()',
      [applicationName],
    );
    return rowCount ?? 0;
  } finally {
    await client.end();
  }
}

async function until(condition: () => boolean, what: string): Promise<void> {
  for (let waited = 0; !condition(); waited += 50) {
    if (waited > 10_000) throw new Error(`still not ${what} after 10 s`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

t.test('a failed LISTEN connection is told once, naming its channel, and again after it came back', async (t) => {
  const url = await (await sharedPostgres()).newDatabase(t);
  const told: { channel: string; message: string }[] = [];
  const storage = await openStorage(
    { engine: 'postgres', url, poolSize: 2, timeoutMs: 2_000 },
    { onListenError: (error, channel) => told.push({ channel, message: error.message }) },
  );
  t.teardown(() => storage.close());
  /** The listening connection's process id, once the key cache listens (from its first lookup on). */
  const listeningPid = async (other?: number): Promise<number> => {
    for (let waited = 0; waited <= 10_000; waited += 100) {
      await storage.accounts.findPrincipal('not-a-key-hash');
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        const { rows } = await client.query<{ pid: number }>(
          "SELECT pid FROM pg_stat_activity WHERE application_name = 'petstore-keys' AND datname = current_database() AND query ILIKE 'LISTEN%'",
        );
        const pid = rows.find((row) => row.pid !== other)?.pid;
        if (pid !== undefined) return pid;
      } finally {
        await client.end();
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error('the key cache does not listen');
  };

  const first = await listeningPid();
  t.equal(await terminate(url, 'petstore-keys'), 1, 'the listening connection is ended by the server');
  await until(() => told.length === 1, 'told');
  t.equal(told[0]?.channel, 'petstore_api_keys');
  t.match(told[0]?.message, /terminat/);

  // Reconnected a second later; ended again, it is told again.
  await listeningPid(first);
  t.equal(told.length, 1, 'nothing more while it listens');
  t.equal(await terminate(url, 'petstore-keys'), 1);
  await until(() => told.length === 2, 'told again');
});
