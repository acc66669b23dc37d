import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { projectWithout } from '../scripts/bench/features.js';
import { type ServerSpec, withServer } from '../scripts/bench/servers.js';
import { sqliteBackend } from '../scripts/bench/tables.js';

// The price list (costs.js, and the bench's features part) turns off the features that have no
// setting with feature-off.js, loaded into the built server: this runs the server so, as they do,
// and looks at what it answers.

const featureOff = (names: string) => projectWithout({ feature: names, env: { BENCH_FEATURE_OFF: names } });

t.test('a feature turned off is gone from the answer, and nothing else is', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'bench-costs-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const table = await sqliteBackend.seed(dir);
  const getOne = async (spec: ServerSpec) =>
    withServer(spec, table, dir, async ({ origin }) => {
      const response = await fetch(`${origin}/v1/pets/7`, { headers: { authorization: `Bearer ${table.key}` } });
      const headers = ['etag', 'deprecation', 'x-request-id'].map((name) => response.headers.get(name) !== null);
      return { status: response.status, body: await response.text(), headers };
    });
  const on = await getOne(projectWithout());
  const off = await getOne(featureOff('ETag,deprecation headers'));
  t.same(on.headers, [true, true, true]);
  t.same(off.headers, [false, false, true], 'the ETag and deprecation headers only');
  t.same([off.status, off.body], [on.status, on.body]);
  await t.rejects(getOne(featureOff('gzip')), /BENCH_FEATURE_OFF: unknown gzip/);
});
