/**
 * `node dist/scripts/bench/profile.js [load|startup]`: runs each server under `node --cpu-prof`,
 * either through every scenario on the 10,000-pet table (load, the default) or only until its
 * first 200 (startup), and prints where its CPU time goes. Profiles are kept in
 * bench-results/profile/<phase>/<server>/. Same settings as the benchmark (BENCH_DURATION, ...).
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatProfile, summariseProfile } from './cpu-profile.js';
import { closeConnections } from './http.js';
import { measureScenarios, prepareTable, withServer } from './measure.js';
import { selectScenarios } from './scenarios.js';
import { SERVER_KINDS } from './server-process.js';
import { benchSettings, RESULTS_DIR, SMALL_TABLE } from './settings.js';

const phase = process.argv[2] ?? 'load';
if (phase !== 'load' && phase !== 'startup') throw new Error(`Usage: profile.js [load|startup]; got ${phase}`);
const settings = benchSettings();
const scenarios = selectScenarios(settings.scenarios);
const dir = mkdtempSync(join(tmpdir(), 'petstore-profile-'));

try {
  const prepared = await prepareTable(dir, SMALL_TABLE);
  for (const kind of SERVER_KINDS) {
    const profileDir = join(RESULTS_DIR, 'profile', phase, kind);
    rmSync(profileDir, { recursive: true, force: true });
    mkdirSync(profileDir, { recursive: true });
    const flags = ['--cpu-prof', `--cpu-prof-dir=${profileDir}`];
    const notes = await withServer(
      kind,
      prepared,
      dir,
      async (server) => {
        if (phase === 'startup') return `first 200 after ${server.startupMs.toFixed(0)} ms`;
        const results = await measureScenarios(server, scenarios, prepared.context, settings);
        return results
          .map(({ scenario, measurement }) => `${scenario.name} ${Math.round(measurement.rps)} req/s`)
          .join(', ');
      },
      { nodeFlags: flags },
    );
    const [file] = readdirSync(profileDir).filter((name) => name.endsWith('.cpuprofile'));
    if (file === undefined) throw new Error(`${kind} wrote no profile in ${profileDir}`);
    process.stdout.write(
      `\n${formatProfile(`${kind} (${phase}; ${notes})`, summariseProfile(join(profileDir, file)))}\n`,
    );
  }
} finally {
  closeConnections();
  rmSync(dir, { recursive: true, force: true });
}
