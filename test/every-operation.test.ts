// The answers every operation gives alike, whatever it does: each one of the contract is asked, so
// a new operation is covered without naming it here.
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { issueKey } from '../src/auth/api-keys.js';
import { type Storage, StorageUnavailableError } from '../src/storage/types.js';
import type { ErrorBody } from '../src/domain/errors.js';
import { listen, parseRawResponse, rawExchange, startApi, type TestApi } from './helpers/api.js';
import { probeDatabase } from './helpers/backend.js';
import type { Contract } from '../src/contract/document.js';
import { assertConforms, servedVersions } from './helpers/contract.js';

type ContractOperation = Contract['operations'][number];

// Every version served is asked, each of its operations under its own base path.
for (const contract of [servedVersions.contract, ...servedVersions.olderContracts]) {
  everyOperationOf(contract);
}

/** An error's words: v1's `message`, or a problem detail's `detail`. */
const wordsOf = (body: { message?: string; detail?: string }) => body.message ?? body.detail;

function everyOperationOf(contract: Contract): void {
  const urlOf = ({ path }: ContractOperation) => `${contract.basePath}${path.replace(/\{[^}]+\}/g, '1')}`;
  const version = (title: string) => `${contract.basePath}: ${title}`;

  function call(api: TestApi, operation: ContractOperation, headers: Record<string, string> = api.auth) {
    const { method, requestMediaType } = operation;
    const body =
      requestMediaType === undefined
        ? {}
        : { payload: '{}', headers: { ...headers, 'content-type': requestMediaType } };
    return api.request({ method, url: urlOf(operation), headers, ...body });
  }

  const withBody = contract.operations.filter(({ requestMediaType }) => requestMediaType !== undefined);
  const withoutBody = contract.operations.filter(({ requestMediaType }) => requestMediaType === undefined);
  const createPet = contract.operations.find(({ operationId }) => operationId === 'createPet') as ContractOperation;

  t.test(
    version('every operation: 401 without a key, 400 for a query parameter it does not declare, 429 over the limit'),
    async (t) => {
      const api = await startApi(t, { rateLimit: { perMinute: 1, authFailuresPerMinute: 0 } });
      for (const operation of contract.operations) {
        t.equal((await call(api, operation, {})).statusCode, 401, `${operation.operationId} without a key`);
      }
      const unlimited = await startApi(t);
      for (const operation of contract.operations) {
        const answer = await unlimited.request({
          method: operation.method,
          url: `${urlOf(operation)}?bogus=1`,
          headers: unlimited.auth,
        });
        t.equal(answer.statusCode, 400, `${operation.operationId} with ?bogus=1`);
      }
      for (const operation of contract.operations) {
        // Each key may make one request a minute: its second is refused before anything else.
        const account = await api.storage.accounts.findAccount('tests');
        const { key } = await issueKey(api.storage.accounts, account?.id ?? 0);
        const headers = { authorization: `Bearer ${key}` };
        await call(api, operation, headers);
        t.equal((await call(api, operation, headers)).statusCode, 429, `${operation.operationId} over the limit`);
      }
    },
  );

  t.test(version('every operation: 503 while the database cannot serve, 500 for a fault of ours'), async (t) => {
    let failure: Error | undefined;
    const api = await startApi(t, {
      storageSeenByServer: (storage): Storage => ({
        ...storage,
        accounts: {
          ...storage.accounts,
          findPrincipal: async (hash) => {
            if (failure !== undefined) throw failure;
            return storage.accounts.findPrincipal(hash);
          },
        },
      }),
    });
    for (const [error, status] of [
      [new StorageUnavailableError('the database is restarting'), 503],
      [new Error('a bug'), 500],
    ] as const) {
      failure = error;
      for (const operation of contract.operations) {
        const answer = await call(api, operation);
        t.equal(answer.statusCode, status, `${operation.operationId}: ${error.message}`);
        if (status === 503) t.ok(Number(answer.headers['retry-after']) > 0, 'with Retry-After');
      }
    }
  });

  t.test(version('every operation with a body: 413 over 16 KiB, 415 for another media type'), async (t) => {
    const api = await startApi(t);
    for (const operation of withBody) {
      const large = await api.request({
        method: operation.method,
        url: urlOf(operation),
        headers: { ...api.auth, 'content-type': operation.requestMediaType ?? '' },
        payload: `{"name":"${'x'.repeat(17 * 1024)}"}`,
      });
      t.equal(large.statusCode, 413, `${operation.operationId} over 16 KiB`);
      const other = await api.request({
        method: operation.method,
        url: urlOf(operation),
        headers: { ...api.auth, 'content-type': 'text/plain' },
        payload: 'hello',
      });
      t.equal(other.statusCode, 415, `${operation.operationId} in text/plain`);
    }
  });

  t.test(version('every operation with a body: 408 when the body does not arrive in time'), async (t) => {
    const api = await startApi(t, { connections: { requestTimeoutMs: 600, maxConnections: 100 } });
    const { origin } = await listen(t, api);
    const port = Number(new URL(origin).port);
    await Promise.all(
      withBody.map(async (operation) => {
        // Two bytes of ten, then nothing.
        const raw = await rawExchange(
          port,
          `${operation.method} ${urlOf(operation)} HTTP/1.1\r\nHost: x\r\nAuthorization: ${api.auth.authorization}\r\n` +
            `Content-Type: ${operation.requestMediaType ?? ''}\r\nContent-Length: 10\r\n\r\n{}`,
        );
        const answer = parseRawResponse(raw);
        assertConforms(operation.method, urlOf(operation), answer);
        t.equal(answer.statusCode, 408, `${operation.operationId} with a body that stops coming`);
      }),
    );
  });

  /** A request on the wire, with a chunked body in `transferEncoding`. */
  function chunkedRequest(api: TestApi, operation: ContractOperation, transferEncoding: string[]): string {
    const body = operation.requestMediaType === undefined ? '' : '{"name":"Rex","categoryId":1}';
    const chunks = body === '' ? '0\r\n\r\n' : `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
    return (
      `${operation.method} ${urlOf(operation)} HTTP/1.1\r\nHost: x\r\nAuthorization: ${api.auth.authorization}\r\n` +
      `Content-Type: ${operation.requestMediaType ?? 'application/json'}\r\nConnection: close\r\n` +
      // A create of a version that requires a key gets a new one; the others take it as well.
      `Idempotency-Key: ${randomUUID()}\r\n` +
      `${transferEncoding.map((value) => `Transfer-Encoding: ${value}\r\n`).join('')}\r\n${chunks}`
    );
  }

  t.test(version('every operation: 501 for a transfer coding besides chunked, before the body is read'), async (t) => {
    const api = await startApi(t);
    await api.createPet({ name: 'Tom', categoryId: 1 });
    const { origin } = await listen(t, api);
    const port = Number(new URL(origin).port);
    const probe = await probeDatabase(t, api.databaseUrl);
    const before = await probe.snapshot();
    const codings = [
      ['gzip, chunked'],
      ['foo, chunked'],
      ['deflate,chunked'],
      ['x-custom;q=1, CHUNKED'],
      ['gzip', 'chunked'],
    ];
    for (const operation of contract.operations) {
      for (const transferEncoding of codings) {
        const answer = parseRawResponse(await rawExchange(port, chunkedRequest(api, operation, transferEncoding)));
        assertConforms(operation.method, urlOf(operation), answer);
        t.equal(
          answer.statusCode,
          501,
          `${operation.operationId} with Transfer-Encoding ${transferEncoding.join(' + ')}`,
        );
        t.equal(answer.json<ErrorBody>().code, 'not_implemented');
        // rawExchange resolves only once the server has ended the connection: the body is not read.
        // (Without `Connection: close`, which would make Node reset a client still sending:
        // docs/decisions.md, "Lingering after a refusal".)
      }
    }
    // RFC 9112 6.3: a last coding other than chunked, or chunked twice, leaves the length unknown.
    for (const transferEncoding of ['gzip', 'chunked, gzip', 'chunked;x', 'chunked, chunked']) {
      const answer = parseRawResponse(await rawExchange(port, chunkedRequest(api, createPet, [transferEncoding])));
      assertConforms('POST', urlOf(createPet), answer);
      t.equal(answer.statusCode, 400, `Transfer-Encoding ${transferEncoding}`);
    }
    t.same(await probe.snapshot(), before, 'nothing was written');
    for (const [transferEncoding, why] of [
      ['CHUNKED', 'chunked alone, in any case, is read'],
      [', chunked', 'an empty list element is no coding (RFC 9110 5.6.1)'],
    ] as const) {
      const answer = parseRawResponse(await rawExchange(port, chunkedRequest(api, createPet, [transferEncoding])));
      assertConforms('POST', urlOf(createPet), answer);
      t.equal(answer.statusCode, 201, why);
    }
  });

  t.test(version('every operation without a body: 415 for a body of any type, before it is read'), async (t) => {
    const api = await startApi(t);
    const probe = await probeDatabase(t, api.databaseUrl);
    await api.createPet({ name: 'Tom', categoryId: 1 });
    const before = await probe.snapshot();
    const bodies: [string, Record<string, string>, string][] = [
      ['text/plain', { 'content-type': 'text/plain' }, 'hello'],
      ['JSON', { 'content-type': 'application/json' }, '{}'],
      ['no type', {}, 'x'],
    ];
    for (const operation of withoutBody) {
      for (const [what, headers, payload] of bodies) {
        const answer = await api.request({
          method: operation.method,
          url: urlOf(operation),
          headers: { ...api.auth, ...headers },
          payload,
        });
        t.equal(answer.statusCode, 415, `${operation.operationId} with a ${what} body`);
        const refused = answer.json<{ code: string; status: number; message?: string; detail?: string }>();
        t.match(refused, { code: 'unsupported_media_type', status: 415 });
        t.equal(wordsOf(refused), 'This operation takes no body: send none');
      }
      for (const contentType of ['application/json', 'text/plain']) {
        const empty = await api.request({
          method: operation.method,
          url: urlOf(operation),
          headers: { ...api.auth, 'content-type': contentType, 'content-length': '0' },
        });
        t.ok(
          empty.statusCode < 400 || empty.statusCode === 404,
          `${operation.operationId}: a ${contentType} Content-Type without a body is no body (${empty.body})`,
        );
      }
    }
    const after = await probe.snapshot();
    t.same(after, { ...before, pets: (before.pets ?? 0) - 1 }, 'only the deletePet with no body removed a pet');
  });
}
