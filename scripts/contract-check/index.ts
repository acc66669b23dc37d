/** Every check of `npm run contract:check`, run against a project folder. */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Contract, loadContract } from '../../src/contract/document.js';
import { checkBreaking } from './breaking.js';
import { checkChangelog } from './changelog.js';
import { type Drift, files } from './drift.js';
import { checkErrorCodes } from './error-codes.js';
import { checkGenerated } from './generated.js';
import { checkEvents } from './events.js';
import { checkHandlers } from './handlers.js';
import { checkLint } from './lint.js';
import { checkDeprecations, checkEventScopes, checkScopes } from './operations.js';
import { checkRelease } from './release.js';
import { checkServedResponses, loadUnreachedResponses } from './responses.js';
import { checkServed } from './served.js';
import { checkVersionChanges } from './versions.js';
import { VersionChain } from '../../src/versions/chain.js';
import { API_VERSIONS } from '../../src/versions/index.js';
import { servedContracts } from '../../src/versions/served.js';

export interface CheckOptions {
  /** The file test/helpers/contract.ts logged the seen responses to; undefined skips that check. */
  responseLog?: string | undefined;
}

export interface CheckResult {
  check: string;
  drifts: Drift[];
}

/** A check that cannot run at all (a tool missing, a file unreadable) is a drift too. */
async function attempt(check: string, run: () => Drift[] | Promise<Drift[]>): Promise<CheckResult> {
  try {
    return { check, drifts: await run() };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return {
      check,
      drifts: [{ what: `the ${check} check could not run: ${message}`, where: check, fix: { edit: 'see the error' } }],
    };
  }
}

async function loadValidContract(root: string): Promise<{ contract?: Contract; result: CheckResult }> {
  try {
    return { contract: await loadContract(join(root, files.contract)), result: { check: 'valid', drifts: [] } };
  } catch (error) {
    const what = `${files.contract} is not a valid OpenAPI document: ${error instanceof Error ? error.message : String(error)}`;
    return {
      result: { check: 'valid', drifts: [{ what, where: files.contract, fix: { edit: `correct ${files.contract}` } }] },
    };
  }
}

/** The responses the tests saw, each version's held to its own contract. */
async function responsesCheck(root: string, contract: Contract, responseLog: string): Promise<Drift[]> {
  const log = existsSync(responseLog) ? readFileSync(responseLog, 'utf8') : undefined;
  const unreached = loadUnreachedResponses(root);
  const { olderContracts } = await servedContracts(root);
  return checkServedResponses([contract, ...olderContracts], log, unreached);
}

/** The responses check alone: `npm test` runs the others beside the load suites, and this once every suite has logged. */
export async function responsesCheckOnly(root: string, responseLog: string): Promise<CheckResult[]> {
  const { contract, result: valid } = await loadValidContract(root);
  if (contract === undefined) return [valid];
  return [valid, await attempt('responses', () => responsesCheck(root, contract, responseLog))];
}

export async function contractCheck(root: string, { responseLog }: CheckOptions = {}): Promise<CheckResult[]> {
  const { contract, result: valid } = await loadValidContract(root);
  const independent = [
    attempt('lint', () => checkLint(root)),
    attempt('generated', () => checkGenerated(root, contract)),
  ];
  if (contract === undefined) return [valid, ...(await Promise.all(independent))];
  const handlers = await attempt('handlers', async () => {
    // Versions that do not match the declared ones are the `versions` check's to report: then the newest alone.
    const contracts = await servedContracts(root).then(
      ({ olderContracts }) => olderContracts,
      () => [],
    );
    return checkHandlers(contract, undefined, { contracts, chain: new VersionChain(API_VERSIONS) });
  });
  // The app cannot start without a handler for every operation: serving would only repeat that.
  const servable = handlers.drifts.length === 0;
  return [
    valid,
    handlers,
    ...(await Promise.all([
      ...independent,
      attempt('breaking', () => checkBreaking(root, contract)),
      attempt('release', () => checkRelease(root, contract)),
      attempt('versions', () => checkVersionChanges(root)),
      attempt('deprecation', () => checkDeprecations(contract)),
      attempt('scopes', () => checkScopes(contract)),
      attempt('errors', () => checkErrorCodes(contract)),
      attempt('event scopes', () => checkEventScopes(contract)),
      attempt('events', () => checkEvents(root, contract)),
      attempt('changelog', () => checkChangelog(root)),
      ...(servable
        ? [attempt('served', async () => checkServed(root, contract, (await servedContracts(root)).olderContracts))]
        : []),
      ...(responseLog === undefined ? [] : [attempt('responses', () => responsesCheck(root, contract, responseLog))]),
    ])),
  ];
}
