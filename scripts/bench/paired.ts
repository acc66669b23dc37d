/**
 * `node dist/scripts/bench/paired.js [scenario]`: CPU per response of both servers at once, each
 * driven by its own load generator at the same fixed rate (below saturation), so a busy moment on
 * this shared machine falls on both. Finer than the benchmark's alternating rounds for a cost of a
 * few microseconds; not a throughput measure. Settings: PAIRED_RATE (req/s per server, 3000),
 * PAIRED_SECONDS (per repetition, 10), PAIRED_REPS (5), PAIRED_WARMUP (seconds, 10), PAIRED_PETS
 * (the table, 10,000); PAIRED_PROJECT_FLAGS and PAIRED_BASELINE_FLAGS give one server Node options
 * of its own (`--max-semi-space-size=8`), to try a runtime setting on one side. Run without
 * --cpu-prof: under the profiler the difference it looks for disappeared (BENCHMARKS.md). Then, per
 * response, where each server's time went by thread and kind, its page faults and context switches
 * (proc-counters.ts).
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { closeConnections } from './http.js';
import { loadWithCpu, prepareTable, withServer } from './measure.js';
import { median } from './report.js';
import { loadRequest, selectScenarios } from './scenarios.js';
import { COUNTERS, CPU_COUNTERS, type Counter, type ProcCounters } from './proc-counters.js';
import { type RunningServer, SERVER_KINDS, type ServerKind } from './server-process.js';
import { SMALL_TABLE, wholeSetting } from './settings.js';

const rate = wholeSetting('PAIRED_RATE', 3000, 1);
const seconds = wholeSetting('PAIRED_SECONDS', 10, 1);
const reps = wholeSetting('PAIRED_REPS', 5, 1);
const warmupSeconds = wholeSetting('PAIRED_WARMUP', 10, 1);
const pets = wholeSetting('PAIRED_PETS', SMALL_TABLE, 1);
const nodeFlags = (name: string) => (process.env[name] ?? '').split(' ').filter((flag) => flag !== '');
const [projectFlags, baselineFlags] = [nodeFlags('PAIRED_PROJECT_FLAGS'), nodeFlags('PAIRED_BASELINE_FLAGS')];
const [scenario] = selectScenarios([process.argv[2] ?? 'get-one']);
if (scenario === undefined) throw new Error('no scenario');
const dir = mkdtempSync(join(tmpdir(), 'petstore-paired-'));

try {
  const prepared = await prepareTable(dir, pets);
  const load = (server: RunningServer, duration = seconds) =>
    loadWithCpu(server, {
      requests: [loadRequest(scenario, prepared.context)],
      seconds: duration,
      connections: 10,
      rate,
    });
  const ratios: number[] = [];
  const counted: Record<ServerKind, ProcCounters[]> = { project: [], baseline: [] };
  const served: Record<ServerKind, number[]> = { project: [], baseline: [] };
  // Each server on its own copy of the table, both running throughout.
  for (const kind of SERVER_KINDS) mkdirSync(join(dir, kind));
  const compare = async (project: RunningServer, baseline: RunningServer) => {
    // Both servers start cold: a warm-up first, not counted.
    await Promise.all([load(project, warmupSeconds), load(baseline, warmupSeconds)]);
    for (let rep = 1; rep <= reps; rep += 1) {
      const [onProject, onBaseline] = await Promise.all([load(project), load(baseline)]);
      const [projectCpu, baselineCpu] = [onProject.cpuUsPerRequest, onBaseline.cpuUsPerRequest];
      const line = `project ${projectCpu.toFixed(1)} us, baseline ${baselineCpu.toFixed(1)} us per response: ${(projectCpu / baselineCpu).toFixed(3)}x`;
      process.stderr.write(`[paired] rep ${rep}/${reps}: ${line}\n`);
      ratios.push(projectCpu / baselineCpu);
      counted.project.push(onProject.counters);
      counted.baseline.push(onBaseline.counters);
      served.project.push(onProject.measurement.rps);
      served.baseline.push(onBaseline.measurement.rps);
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
  const spread = `${Math.min(...ratios).toFixed(3)}-${Math.max(...ratios).toFixed(3)}`;
  const achieved = SERVER_KINDS.map((kind) => `${kind} ${Math.round(median(served[kind]))}`).join(', ');
  process.stdout.write(
    `${scenario.name} on ${pets} pets at ${rate} req/s each (served: ${achieved}), after ${warmupSeconds} s of ` +
      `warm-up: x CPU per response median ${median(ratios).toFixed(3)} (${spread} over ${reps} x ${seconds} s)\n`,
  );
  // CPU time is counted in 10 ms ticks: one decimal is all a repetition of a few seconds resolves.
  const cell = (kind: ServerKind, name: Counter) =>
    median(counted[kind].map((row) => row[name])).toFixed(CPU_COUNTERS.has(name) ? 1 : 3);
  const rows = COUNTERS.map(
    (name) => `  ${name.padEnd(24)} ${cell('project', name).padStart(9)} ${cell('baseline', name).padStart(9)}`,
  );
  process.stdout.write(
    `per response, medians (CPU in us, from /proc):\n  ${''.padEnd(24)} ${'project'.padStart(9)} ${'baseline'.padStart(9)}\n${rows.join('\n')}\n`,
  );
} finally {
  closeConnections();
  rmSync(dir, { recursive: true, force: true });
}
