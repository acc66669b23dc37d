import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, errors, type Locator } from 'playwright-core';
import t from 'tap';
import { projectRoot } from '../src/contract/paths.js';
import type { Pet } from '../src/storage/types.js';
import { listen, startApi, temporaryDirectory, type TapTest } from './helpers/api.js';
import { assertConforms, contract, servedVersions } from './helpers/contract.js';

const executablePath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ENABLE = 'apt-get install -y chromium';
const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

/** Waits for the locator to be shown; false only on a timeout (a locator matching twice still throws). */
async function becomesVisible(locator: Locator): Promise<boolean> {
  return locator.waitFor({ state: 'visible', timeout: 5_000 }).then(
    () => true,
    (error: unknown) => {
      if (error instanceof errors.TimeoutError) return false;
      throw error;
    },
  );
}

async function docsInChromium(t: TapTest): Promise<void> {
  if (!t.ok(existsSync(executablePath), `a browser at ${executablePath} (install it with: ${ENABLE})`)) return;
  const api = await startApi(t);
  const seeded: Pet[] = [];
  for (const pet of [
    { name: 'Rex', categoryId: 1 },
    { name: 'Tom', categoryId: 2, status: 'pending' as const },
    { name: 'Zoë', categoryId: 3 },
  ]) {
    seeded.push(await api.createPet(pet));
  }
  const { origin, baseUrl } = await listen(t, api);

  const context = await chromium.launchPersistentContext(temporaryDirectory(t), {
    executablePath,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  t.teardown(() => context.close());

  // Every request the page makes is seen here; one to another host is refused and fails the test.
  const leaks: string[] = [];
  await context.route('**/*', (route) => {
    const url = new URL(route.request().url());
    if (LOCAL_HOSTS.has(url.hostname)) return route.continue();
    leaks.push(url.href);
    return route.abort('blockedbyclient');
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const pageErrors: string[] = [];
  page.on('pageerror', (error) => pageErrors.push(error.message));
  page.on('console', (message) => {
    if (message.type() === 'error') pageErrors.push(message.text());
  });

  // The page lists every version served, the newest first and shown; v1's is opened from the list.
  await page.goto(`${origin}/docs`);
  const versions = page.locator('.topbar select');
  await versions.waitFor();
  const names = [servedVersions.contract, ...servedVersions.olderContracts].map(
    ({ basePath, document }) => `${basePath.slice(1)} (${document.info.version})`,
  );
  t.strictSame(await versions.locator('option').allInnerTexts(), names, 'every version listed, the newest first');
  await page.locator('#operations-pets-listPets').waitFor();
  t.equal(await page.locator('#operations-pets-getPet').count(), 0, 'the newest is shown: v2, without getPet');
  await page.goto(
    `${origin}/docs/?urls.primaryName=${encodeURIComponent(names.find((name) => name.startsWith('v1 ')) ?? '')}`,
  );
  const operations = page.locator('.opblock');
  await operations.first().waitFor();
  const webhooks = Object.keys(contract.dereferenced.webhooks ?? {});
  t.equal(await operations.count(), contract.operations.length + webhooks.length, 'one block per operation and event');
  for (const event of webhooks)
    t.ok(await becomesVisible(page.getByText(event, { exact: true }).first()), `the ${event} event is shown`);
  const blockOf = (operationId: string) => {
    const { method, path } = contract.operations.find((operation) => operation.operationId === operationId) ?? {};
    const item = contract.dereferenced.paths?.[path ?? ''] as Record<string, { tags?: string[] }> | undefined;
    return page.locator(`#operations-${item?.[method?.toLowerCase() ?? '']?.tags?.[0] ?? ''}-${operationId}`);
  };
  for (const { operationId, method, path } of contract.operations) {
    const block = blockOf(operationId);
    const summary = await block.locator('.opblock-summary').innerText();
    t.match(summary, method, operationId);
    t.match(summary, path);
    t.match(summary, operationId);
  }

  const beta = contract.operations.filter(({ stability }) => stability === 'beta');
  t.ok(beta.length > 0, 'the contract has beta operations');
  for (const { operationId } of beta) {
    const block = blockOf(operationId);
    await block.locator('.opblock-summary').click();
    const marker = block.locator('tr', { hasText: 'x-stability-level' });
    t.ok(await becomesVisible(marker), `${operationId} shows its stability`);
    t.match(await marker.innerText(), /\bbeta\b/, `${operationId} is shown as beta`);
    await block.locator('.opblock-summary').click();
  }

  const getPet = page.locator('#operations-pets-getPet');
  t.match(await getPet.getAttribute('class'), /\bopblock-deprecated\b/, 'getPet is shown deprecated');
  await getPet.locator('.opblock-summary').click();
  await getPet.getByText('Warning: Deprecated').waitFor();
  // The description is in the DOM before the opened block has its size: wait for it to be shown.
  t.ok(await becomesVisible(getPet.getByText('to be removed on 5 December 2030')), 'the sunset date is visible');

  const authorize = page.locator('.scheme-container button.authorize');
  await authorize.click();
  const dialog = page.locator('.dialog-ux');
  await dialog.getByLabel('auth-bearer-value').fill(api.key);
  await dialog.getByRole('button', { name: 'Apply credentials' }).click();
  await dialog.getByRole('button', { name: 'Remove authorization' }).waitFor();
  await dialog.getByRole('button', { name: 'Close' }).click();
  t.match(await authorize.getAttribute('class'), /\blocked\b/, 'the page holds the key');

  const listPets = page.locator('#operations-pets-listPets');
  await listPets.locator('.opblock-summary').click();
  await listPets.getByRole('button', { name: 'Try it out' }).click();
  // Try it out fills in each parameter's example; the example cursor would skip these pets.
  await listPets.locator('tr[data-param-name="cursor"] input').fill('');
  await listPets.locator('tr[data-param-name="status"] select').selectOption('');
  const [response] = await Promise.all([
    page.waitForResponse((candidate) => candidate.url().startsWith(`${baseUrl}/pets`)),
    listPets.getByRole('button', { name: 'Execute' }).click(),
  ]);
  const url = new URL(response.url());
  t.equal(url.search, '?limit=20', 'the page sent the query as filled in');
  t.equal(response.status(), 200, 'the API answered the page');
  assertConforms('GET', url.pathname + url.search, {
    statusCode: response.status(),
    headers: await response.allHeaders(),
    body: await response.text(),
  });
  const shown = listPets.locator('.live-responses-table tr.response');
  t.equal((await shown.locator('.response-col_status').innerText()).trim(), '200', 'the page shows the 200');
  const shownBody = await shown.locator('.response-col_description pre').first().innerText();
  t.strictSame(JSON.parse(shownBody), seeded, 'the page shows the pets created beforehand');

  const resultsDir = join(projectRoot, 'test-results');
  mkdirSync(resultsDir, { recursive: true });
  await page.screenshot({ path: join(resultsDir, 'docs.png'), fullPage: true });

  t.strictSame(leaks, [], 'no request left this machine');
  t.strictSame(pageErrors, [], 'no errors in the page (CSP violations included)');
}

const title = '/docs in Chromium lists the operations, marks getPet deprecated and runs listPets';
// Without a browser the test says so, unless CI is set: there it runs and fails.
if (existsSync(executablePath) || process.env.CI) {
  t.test(title, docsInChromium);
} else {
  t.skip(`${title}: no browser at ${executablePath} (CHROMIUM_PATH); enable it with: ${ENABLE}`, docsInChromium);
}
