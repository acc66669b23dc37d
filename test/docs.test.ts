import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { parse } from 'yaml';
import { buildApp } from '../src/app.js';
import type { ErrorBody } from '../src/domain/errors.js';
import { projectRoot } from '../src/contract/paths.js';
import { newestRelease } from '../src/versions/releases.js';
import { listen, startApi } from './helpers/api.js';
import { servedVersions } from './helpers/contract.js';

// assertConforms knows the contract's operations and which paths are served outside it: the Error
// answers below go through api.request(); the documents and pages are checked here.

// What is served under /v1: the last v1 release, kept as it was promised (docs/versions.md).
const release = newestRelease(projectRoot, 1);
if (release === undefined) throw new Error('no v1 release in contracts/');
const committed = parse(readFileSync(join(projectRoot, release.file), 'utf8')) as {
  servers: { url: string; description: string }[];
};

/** The committed contract with this instance named first. */
function servedFor(instanceUrl: string) {
  const others = committed.servers.filter((server) => server.url !== instanceUrl);
  return { ...committed, servers: [{ url: instanceUrl, description: 'This instance' }, ...others] };
}

const formats: { path: string; type: RegExp; parse: (text: string) => unknown }[] = [
  {
    path: '/v1/openapi.json',
    type: /^application\/json; charset=utf-8$/,
    parse: (text) => JSON.parse(text) as unknown,
  },
  { path: '/v1/openapi.yaml', type: /^application\/yaml; charset=utf-8$/, parse: (text) => parse(text) as unknown },
];

t.test('the served contract is the committed one, with this instance first in servers', async (t) => {
  const api = await startApi(t);
  const { origin } = await listen(t, api);
  for (const format of formats) {
    for (const headers of [{}, { authorization: 'Bearer not-a-key' }]) {
      const response = await fetch(`${origin}${format.path}`, { headers });
      t.equal(response.status, 200, `${format.path} needs no key`);
      t.match(response.headers.get('content-type'), format.type);
      t.strictSame(format.parse(await response.text()), servedFor(`${origin}/v1`), format.path);
    }
  }
});

t.test('servers[0] comes from the configured public URL or the socket, never from Host', async (t) => {
  const api = await startApi(t);
  const { origin } = await listen(t, api);
  const spoofed = await api.app.inject({ url: '/v1/openapi.json', headers: { host: 'evil.example' } });
  t.strictSame(JSON.parse(spoofed.body), servedFor(`${origin}/v1`));

  const behindProxy = await buildApp({
    ...servedVersions,
    storage: api.storage,
    publicUrl: 'https://pets.example:8443/',
  });
  t.teardown(() => behindProxy.close());
  for (const format of formats) {
    const response = await behindProxy.inject({ url: format.path, headers: { host: 'evil.example' } });
    t.strictSame(format.parse(response.body), servedFor('https://pets.example:8443/v1'), format.path);
  }

  // `npm start`'s address is in the contract already: served once, as this instance.
  const local = await buildApp({ ...servedVersions, storage: api.storage, publicUrl: 'http://127.0.0.1:3000' });
  t.teardown(() => local.close());
  const { servers } = JSON.parse((await local.inject({ url: '/v1/openapi.json' })).body) as typeof committed;
  t.same(
    servers.map((server) => [server.url, server.description]),
    [
      ['http://127.0.0.1:3000/v1', 'This instance'],
      ...committed.servers.slice(0, -1).map((server) => [server.url, server.description]),
    ],
  );

  for (const publicUrl of [
    'pets.example',
    'ftp://pets.example',
    'https://pets.example/?a=1',
    'https://u:p@pets.example',
  ]) {
    await t.rejects(
      buildApp({ ...servedVersions, storage: api.storage, publicUrl }),
      /PUBLIC_URL must be an http or https URL/,
      publicUrl,
    );
  }
  for (const publicUrl of [
    'https://pets.example/v1',
    'https://pets.example/store/',
    'https://pets.example/store/v1/',
  ]) {
    await t.rejects(
      buildApp({ ...servedVersions, storage: api.storage, publicUrl }),
      /PUBLIC_URL is the origin clients reach the server at, with no path/,
      `${publicUrl}: Location and Link name paths from the root, which a prefix would leave`,
    );
  }
});

t.test('the served contract can be revalidated with its ETag', async (t) => {
  const api = await startApi(t);
  const { origin } = await listen(t, api);
  const etags = new Set<string>();
  for (const { path } of formats) {
    const url = `${origin}${path}`;
    const first = await fetch(url);
    const etag = first.headers.get('etag') ?? '';
    t.match(etag, /^"[^"]+"$/, `${path} has a strong ETag`);
    t.equal(first.headers.get('cache-control'), 'no-cache', 'caches must revalidate');
    etags.add(etag);

    for (const ifNoneMatch of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
      const again = await fetch(url, { headers: { 'if-none-match': ifNoneMatch } });
      t.equal(again.status, 304, `If-None-Match: ${ifNoneMatch}`);
      t.equal(await again.text(), '');
      t.equal(again.headers.get('etag'), etag);
      t.equal(again.headers.get('cache-control'), 'no-cache');
    }
    const changed = await fetch(url, { headers: { 'if-none-match': '"other"' } });
    t.equal(changed.status, 200, 'a stale ETag gets the document');
  }
  t.equal(etags.size, 2, 'JSON and YAML have different ETags');

  const elsewhere = await buildApp({ ...servedVersions, storage: api.storage, publicUrl: 'https://pets.example' });
  t.teardown(() => elsewhere.close());
  const response = await elsewhere.inject({ url: formats[0]?.path ?? '' });
  t.notOk(etags.has(String(response.headers.etag)), 'another servers[0] is another ETag');
});

// Other methods on the documents and the page are 405s, as on /healthz: errors.test.ts.
t.test('other methods on the assets are 404 Error bodies: a file may or may not be there', async (t) => {
  const api = await startApi(t);
  // @fastify/static answers HEAD for assets as for GET.
  for (const method of ['POST', 'PUT', 'DELETE', 'PATCH']) {
    const response = await api.request({ method, url: '/docs/static/swagger-ui.css' });
    t.equal(response.statusCode, 404, method);
  }
  const missing = await api.request({ method: 'GET', url: '/docs/static/nope.js' });
  t.equal(missing.json<ErrorBody>().code, 'not_found', 'a missing asset is an Error body');
});

t.test('/docs serves the page and every asset it names from this server, cacheable', async (t) => {
  const api = await startApi(t);
  for (const url of ['/docs', '/docs/']) {
    const page = await api.app.inject({ url });
    t.equal(page.statusCode, 200, url);
    t.match(page.headers['content-type'], /^text\/html/);
    t.match(page.headers['content-security-policy'], /default-src 'self'/);
    t.notMatch(page.headers['cache-control'] ?? '', /no-store/, 'the API scope’s no-store stays in the API');

    const assets = [...page.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((match) => match[1] ?? '');
    t.ok(assets.length >= 5, `${url} names its scripts, styles and icons`);
    for (const asset of assets) {
      t.notMatch(asset, /^[a-z]+:|^\/\//i, `${asset} is served from here`);
      const resolved = new URL(asset, `http://localhost${url}`).pathname;
      const response = await api.app.inject({ url: resolved });
      t.equal(response.statusCode, 200, resolved);
      t.notMatch(response.headers['cache-control'] ?? '', /no-store/, `${resolved} is cacheable`);
    }
  }

  const redirect = await api.app.inject({ url: '/docs/static/index.html' });
  t.equal(redirect.statusCode, 302);
  t.equal(redirect.headers.location, '/docs/');

  const initializer = await api.app.inject({ url: '/docs/static/swagger-initializer.js' });
  t.match(initializer.body, /"validatorUrl":null/, 'no external validator badge');
  t.match(initializer.body, /"persistAuthorization":true/);

  t.match(
    initializer.body,
    /urls: \[\{"url":"\/v2\/openapi\.json","name":"v2 \(2\.0\.0\)"\},\{"url":"\/v1\/openapi\.json","name":"v1 \(1\.2\.0\)"\}\]/,
    'the page lists the served contracts, the newest first',
  );
  t.notMatch(initializer.body, /\/json['"]/, 'and no other address for it');
  for (const url of ['/docs/json', '/docs/yaml']) {
    const second = await api.app.inject({ url });
    t.equal(second.statusCode, 404, `${url}: one address for the contract, the documented one`);
    t.match(JSON.parse(second.body), {
      code: 'not_found',
      message: 'The contract is at /v2/openapi.json, /v1/openapi.json',
    });
    const posted = await api.app.inject({ method: 'POST', url });
    t.equal(posted.statusCode, 404, `${url}: not served, so a 404 to any method, not a 405`);
  }
});
