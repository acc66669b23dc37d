import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Server as TlsServer } from 'node:tls';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { stringify } from 'yaml';
import type { Contract, OpenApiDocument } from '../contract/document.js';
import { ApiError } from '../domain/errors.js';

export interface DocsOptions {
  /** Every version served, newest first: each contract at its own base path; the page lists them, the newest first. */
  contracts: readonly Contract[];
  /**
   * The URL clients reach this instance at, without the base path (e.g. `https://pets.example`).
   * Default: the address the server listens on.
   */
  publicUrl?: string | undefined;
}

interface Representation {
  body: string;
  contentType: string;
  etag: string;
}

interface Published {
  document: OpenApiDocument;
  json: Representation;
  yaml: Representation;
}

/**
 * @fastify/swagger-ui's own copies of the contract: registered by it, not served (one address for
 * the contract, the documented one), so a 404 whatever the method.
 */
export const UNSERVED_DOCS_PATHS: readonly string[] = ['/docs/json', '/docs/yaml'];

/** Caches may store the contract but must revalidate it: a restart can change `servers[0]`. */
const CACHE_CONTROL = 'no-cache';

/** Everything the page needs comes from this server; nothing else may be fetched or framed. */
const DOCS_CSP =
  "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'self'; form-action 'self'; " +
  // The one inline <style> the top bar (the list of versions) writes, by its hash: no other.
  "style-src 'self' 'sha256-RL3ie0nH+Lzz2YNqQN83mnU0J1ot4QL7b99vMdIX99w='; frame-ancestors 'none'";

const DOCS_UI_CONFIG = {
  // Only the served contracts: no field to explore other URLs, no external validator badge.
  layout: 'BaseLayout',
  validatorUrl: null,
  deepLinking: true,
  displayOperationId: true,
  persistAuthorization: true,
  // The contract's extensions are part of what it promises: `x-stability-level: beta` on an
  // operation, `x-transitions` on a status, `x-sunset` on a deprecated operation.
  showExtensions: true,
};

/**
 * The page's script: @fastify/swagger-ui's own always loads the contract from /docs/json, a second
 * address; this one loads the served contract.
 */
function swaggerInitializer(uiConfig: object, contracts: readonly Contract[]): string {
  const [newest] = contracts;
  // One version: its contract alone. Several: the top bar's list of them (and no field to type
  // another URL in), the newest first and shown; `?urls.primaryName=v1` opens another.
  const source =
    contracts.length === 1 && newest !== undefined
      ? `url: new URL(${JSON.stringify(`${newest.basePath}/openapi.json`)}, window.location.href).href,`
      : `layout: 'StandaloneLayout',
    urls: ${JSON.stringify(contracts.map(({ basePath, document }) => ({ url: `${basePath}/openapi.json`, name: `${basePath.slice(1)} (${document.info.version})` })))}.map(function (version) {
      return { url: new URL(version.url, window.location.href).href, name: version.name };
    }),`;
  return `window.onload = function () {
  window.ui = SwaggerUIBundle(Object.assign(${JSON.stringify(uiConfig)}, {
    ${source}
    dom_id: '#swagger-ui',
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
    plugins: [SwaggerUIBundle.plugins.DownloadUrl]
  }));
};
`;
}

/**
 * PUBLIC_URL without a trailing slash: an origin, no path. The API's base path is added to it, and
 * the answers' Location and Link, and the docs page, name paths from the root, which a path prefix
 * would leave (a client following them would miss the API).
 */
function normalisePublicUrl(value: string, basePath: string): string {
  const url = URL.canParse(value) ? new URL(value) : undefined;
  if (
    url === undefined ||
    !['http:', 'https:'].includes(url.protocol) ||
    url.search !== '' ||
    url.hash !== '' ||
    url.username !== '' ||
    url.password !== ''
  ) {
    throw new Error(`PUBLIC_URL must be an http or https URL without credentials, query or fragment; got "${value}"`);
  }
  if (url.pathname !== '/') {
    throw new Error(
      `PUBLIC_URL is the origin clients reach the server at, with no path: the server adds ${basePath}, and its ` +
        `Location and Link headers are paths from the root, which a path prefix would leave; got "${value}"`,
    );
  }
  return url.origin;
}

/** `http://127.0.0.1:3000` for the bound socket (https when it speaks TLS); a wildcard bind is named by its loopback address. */
function listeningOrigin(server: FastifyInstance['server']): string | undefined {
  const address: AddressInfo | string | null = server.address();
  if (address === null || typeof address === 'string') return undefined;
  const host = address.address === '0.0.0.0' ? '127.0.0.1' : address.address === '::' ? '::1' : address.address;
  const scheme = server instanceof TlsServer ? 'https' : 'http';
  return `${scheme}://${host.includes(':') ? `[${host}]` : host}:${address.port}`;
}

function represent(body: string, contentType: string): Representation {
  return { body, contentType, etag: `"${createHash('sha256').update(body).digest('base64url')}"` };
}

function publish(document: OpenApiDocument, instanceUrl: string | undefined): Published {
  const served =
    instanceUrl === undefined
      ? document
      : {
          ...document,
          servers: [
            { url: instanceUrl, description: 'This instance' },
            // The contract's own entry for `npm start` names the same address: once is enough.
            ...(document.servers ?? []).filter((server) => server.url !== instanceUrl),
          ],
        };
  return {
    document: served,
    json: represent(JSON.stringify(served), 'application/json; charset=utf-8'),
    yaml: represent(
      stringify(served, { aliasDuplicateObjects: false, lineWidth: 0 }),
      'application/yaml; charset=utf-8',
    ),
  };
}

/** RFC 9110 13.1.2: `*` or a list of entity tags, compared weakly. */
function ifNoneMatch(header: string | undefined, etag: string): boolean {
  return (header ?? '').split(',').some((tag) => {
    const trimmed = tag.trim();
    return trimmed === '*' || trimmed.replace(/^W\//, '') === etag;
  });
}

function sendRepresentation(request: FastifyRequest, reply: FastifyReply, representation: Representation) {
  reply.header('etag', representation.etag).header('cache-control', CACHE_CONTROL);
  if (ifNoneMatch(request.headers['if-none-match'], representation.etag)) return reply.code(304).send();
  return reply.type(representation.contentType).send(representation.body);
}

/**
 * Serves one version's contract as written (refs intact) at `{basePath}/openapi.json` and `.yaml`;
 * returns what it serves.
 */
function serveDocuments(app: FastifyInstance, contract: Contract, publicUrl: string | undefined): () => Published {
  // servers[0] names this instance. The Host header is never used for it: the contract is
  // cacheable, so one client could poison what a shared cache hands to others. Without a
  // configured public URL, the bound address is read per request, because the app is built
  // before it listens (on port 0 in tests).
  const configured = publicUrl === undefined ? undefined : normalisePublicUrl(publicUrl, contract.basePath);
  let cache: { origin: string | undefined; published: Published } | undefined;
  const current = (): Published => {
    const origin = configured ?? listeningOrigin(app.server);
    if (cache === undefined || cache.origin !== origin) {
      const instanceUrl = origin === undefined ? undefined : `${origin}${contract.basePath}`;
      cache = { origin, published: publish(contract.document, instanceUrl) };
    }
    return cache.published;
  };
  app.get(`${contract.basePath}/openapi.json`, (request, reply) => sendRepresentation(request, reply, current().json));
  app.get(`${contract.basePath}/openapi.yaml`, (request, reply) => sendRepresentation(request, reply, current().yaml));
  return current;
}

/**
 * Serves the contract as written (refs intact) at `{basePath}/openapi.json` and `.yaml`, and an
 * interactive reference for it at `/docs`, all without authentication.
 */
async function docsPlugin(app: FastifyInstance, { contracts, publicUrl }: DocsOptions): Promise<void> {
  const [contract] = contracts;
  if (contract === undefined) throw new Error('the docs need a contract');
  const current = new Map(contracts.map((version) => [version, serveDocuments(app, version, publicUrl)])).get(contract);
  if (current === undefined) throw new Error('the newest contract is not served');

  // @fastify/swagger-ui depends on @fastify/swagger only for the `swagger()` decorator its page
  // loads the document from. @fastify/swagger would merely hand back this static document, so
  // this stands in for it under its name.
  await app.register(
    fp(
      async (scope: FastifyInstance) => {
        scope.decorate('swagger', (options?: { yaml?: boolean }) =>
          options?.yaml === true ? current().yaml.body : current().document,
        );
      },
      { name: '@fastify/swagger' },
    ),
  );
  const contractUrls = contracts.map(({ basePath }) => `${basePath}/openapi.json`).join(', ');
  const initializer = swaggerInitializer(DOCS_UI_CONFIG, contracts);
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    staticCSP: DOCS_CSP,
    theme: { title: `${contract.document.info.title} API reference` },
    uiConfig: DOCS_UI_CONFIG,
    // One address for the contract, the documented one: the page loads it, and the plugin's own
    // copies (/docs/json, /docs/yaml) are not served.
    uiHooks: {
      onRequest: (request, reply, done) => {
        const path = request.url.split('?', 1)[0];
        if (path !== undefined && UNSERVED_DOCS_PATHS.includes(path)) {
          done(new ApiError(404, 'not_found', `The contract is at ${contractUrls}`));
          return;
        }
        if (path === '/docs/static/swagger-initializer.js') {
          void reply.type('application/javascript; charset=utf-8').send(initializer);
          return;
        }
        done();
      },
    },
  });
}

export default docsPlugin;
