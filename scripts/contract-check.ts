/**
 * `npm run contract:check`: fails on every way the code and openapi.yaml can part, naming what
 * drifted and the command (or edit) that fixes it. With PETSTORE_RESPONSE_LOG naming the log of
 * the responses the tests saw, it checks those too. `--responses` runs that check alone: `npm test`
 * runs the others while the load suites run, and this one after every suite has logged.
 */
import { projectRoot } from '../src/contract/paths.js';
import { formatDrift } from './contract-check/drift.js';
import { contractCheck, responsesCheckOnly } from './contract-check/index.js';
import { RESPONSES_NOT_CHECKED } from './contract-check/responses.js';

async function main(): Promise<void> {
  const responseLog = process.env.PETSTORE_RESPONSE_LOG;
  const responsesOnly = process.argv.includes('--responses');
  if (responsesOnly && responseLog === undefined) {
    console.error('contract:check --responses: PETSTORE_RESPONSE_LOG names no log of the responses tests saw');
    process.exitCode = 2;
    return;
  }
  const results =
    responsesOnly && responseLog !== undefined
      ? await responsesCheckOnly(projectRoot, responseLog)
      : await contractCheck(projectRoot, { responseLog });
  const drifts = results.flatMap((result) => result.drifts);
  for (const drift of drifts) console.error(formatDrift(drift));
  // Said whether the rest passes or not: a run without the log checks less than npm test does.
  const notChecked = responseLog === undefined ? [RESPONSES_NOT_CHECKED] : [];
  if (drifts.length > 0) {
    console.error(`contract:check: ${drifts.length} drift${drifts.length === 1 ? '' : 's'} between code and contract`);
    for (const line of notChecked) console.error(line);
    process.exitCode = 1;
    return;
  }
  console.log(`contract:check: ok: ${results.map(({ check }) => check).join(', ')}`);
  for (const line of notChecked) console.log(line);
}

await main();
