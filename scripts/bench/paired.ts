/**
 * `node dist/scripts/bench/paired.js [scenario]`: CPU per response of both servers at once, each
 * driven by its own load generator at the same fixed rate (below saturation), so a busy moment on
 * this shared machine falls on both. Finer than the benchmark's alternating rounds for a cost of a
 * few microseconds; not a throughput measure. Settings: PAIRED_RATE (req/s per server, 3000),
 * PAIRED_SECONDS (per repetition, 10), PAIRED_REPS (5); PAIRED_PROJECT_FLAGS and
 * PAIRED_BASELINE_FLAGS give one server Node options of its own (`--max-semi-space-size=8`), to try
 * a runtime setting on one side. Run without --cpu-prof: under the profiler the difference it looks
 * for disappeared (BENCHMARKS.md).
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { closeConnections } from './http.js';
import { loadWithCpu, prepareTable, withServer } from './measure.js';
import { median } from './report.js';
import { loadRequest, selectScenarios } from './scenarios.js';
import { type RunningServer, SERVER_KINDS } from './server-process.js';
import { SMALL_TABLE, wholeSetting } from './settings.js';

const rate = wholeSetting('PAIRED_RATE', 3000, 1);
const seconds = wholeSetting('PAIRED_SECONDS', 10, 1);
const reps = wholeSetting('PAIRED_REPS', 5, 1);
const nodeFlags = (name: string) => (process.env[name] ?? '').split(' ').filter((flag) => flag !== '');
const [projectFlags, baselineFlags] = [nodeFlags('PAIRED_PROJECT_FLAGS'), nodeFlags('PAIRED_BASELINE_FLAGS')];
const [scenario] = selectScenarios([process.argv[2] ?? 'get-one']);
if (scenario === undefined) throw new Error('no scenario');
const dir = mkdtempSync(join(tmpdir(), 'petstore-paired-'));

try {
  const prepared = await prepareTable(dir, SMALL_TABLE);
  const load = (server: RunningServer) =>
    loadWithCpu(server, { requests: [loadRequest(scenario, prepared.context)], seconds, connections: 10, rate });
  const ratios: number[] = [];
  // Each server on its own copy of the table, both running throughout.
  for (const kind of SERVER_KINDS) mkdirSync(join(dir, kind));
  const compare = async (project: RunningServer, baseline: RunningServer) => {
    // The first repetition is the warm-up: both servers start cold.
    for (let rep = 0; rep <= reps; rep += 1) {
      const [onProject, onBaseline] = await Promise.all([load(project), load(baseline)]);
      const [projectCpu, baselineCpu] = [onProject.cpuUsPerRequest, onBaseline.cpuUsPerRequest];
      const line = `project ${projectCpu.toFixed(1)} us, baseline ${baselineCpu.toFixed(1)} us per response: ${(projectCpu / baselineCpu).toFixed(3)}x`;
      process.stderr.write(`[paired] ${rep === 0 ? 'warm-up' : `rep ${rep}/${reps}`}: ${line}\n`);
      if (rep > 0) ratios.push(projectCpu / baselineCpu);
    }
  };
  await withServer(
    'project',
    prepared,
    join(dir, 'project'),
    (project) =>
      withServer('baseline', prepared, join(dir, 'baseline'), (baseline) => compare(project, baseline), {
        nodeFlags: baselineFlags,
      }),
    { nodeFlags: projectFlags },
  );
  process.stdout.write(
    `${scenario.name} at ${rate} req/s each: x CPU per response median ${median(ratios).toFixed(3)} ` +
      `(${Math.min(...ratios).toFixed(3)}-${Math.max(...ratios).toFixed(3)} over ${reps} repetitions)\n`,
  );
} finally {
  closeConnections();
  rmSync(dir, { recursive: true, force: true });
}
