import { deflateSync, gzipSync } from 'node:zlib';
import t from 'tap';
import type { ErrorBody } from '../src/domain/errors.js';
import { listen, parseRawResponse, rawExchange, startApi } from './helpers/api.js';
import { assertConforms, CLIENT_METHODS, contractPath, contractPaths } from './helpers/contract.js';

const json = { 'content-type': 'application/json' };

t.test('unknown paths are 404 Error bodies, with or without a key', async (t) => {
  const api = await startApi(t);
  const unknown = ['/v1/no-such-resource', '/v1/nope', '/', '/v3/pets', '/v1/pets/1/extra', '/V1/PETS', '/v1//pets'];
  // An empty segment names no pet: not getPet with an empty id (a 400 about a deprecated operation).
  for (const url of [...unknown, '/v1/pets/', '/v1/pets/?limit=1']) {
    for (const headers of [{}, api.auth]) {
      const response = await api.request({ method: 'GET', url, headers });
      t.equal(response.statusCode, 404, url);
      t.same(Object.keys(response.json<ErrorBody>()).sort(), ['code', 'message', 'status']);
      t.equal(response.json<ErrorBody>().code, 'not_found');
      t.equal(response.headers['cache-control'], 'no-store', `${url}: not kept by caches`);
      t.equal(response.headers.deprecation, undefined, `${url}: no operation's headers`);
    }
  }
  const deleted = await api.request({ method: 'DELETE', url: '/v1/pets/', headers: api.auth });
  t.equal(deleted.statusCode, 404, 'nothing is served on /v1/pets/, so no method is allowed there');
});

t.test('a known path with another method is a 405 with Allow naming the methods it declares', async (t) => {
  const api = await startApi(t);
  t.ok(contractPaths.length > 0, 'the contract has paths');
  for (const { url, allow, undeclared } of contractPaths) {
    for (const method of undeclared) {
      const response = await api.request({ method, url, headers: api.auth });
      t.equal(response.statusCode, 405, `${method} ${url}`);
      t.equal(response.headers.allow, allow, `${method} ${url}: Allow`);
      t.equal(response.headers['cache-control'], 'no-store', `${method} ${url}: not kept by caches`);
      if (method !== 'HEAD') t.equal(response.json<ErrorBody>().code, 'method_not_allowed');
    }
  }
});

t.test('paths served outside the contract answer other methods with a 405 and Allow: GET', async (t) => {
  const api = await startApi(t);
  const paths = ['/healthz', '/readyz', '/v1/openapi.json', '/v1/openapi.yaml', '/docs', '/docs/'];
  for (const url of paths) {
    for (const method of [...CLIENT_METHODS.filter((method) => method !== 'GET'), 'CONNECT']) {
      const response = await api.request({ method, url, headers: json, payload: '{' });
      t.equal(response.statusCode, 405, `${method} ${url}`);
      t.equal(response.headers.allow, 'GET', `${method} ${url}: Allow`);
      if (method !== 'HEAD') t.equal(response.json<ErrorBody>().code, 'method_not_allowed');
    }
  }
});

t.test('body limits, media types and malformed JSON answer with Error bodies and store nothing', async (t) => {
  const api = await startApi(t);
  const cases: [string, Record<string, string>, string, number, string][] = [
    [
      'a body over 16 KiB',
      json,
      JSON.stringify({ name: 'x', categoryId: 1, pad: 'y'.repeat(16 * 1024) }),
      413,
      'payload_too_large',
    ],
    ['text/plain', { 'content-type': 'text/plain' }, '{"name":"x","categoryId":1}', 415, 'unsupported_media_type'],
    [
      'form encoding',
      { 'content-type': 'application/x-www-form-urlencoded' },
      'name=x&categoryId=1',
      415,
      'unsupported_media_type',
    ],
    [
      'json-like type',
      { 'content-type': 'application/jsonx' },
      '{"name":"x","categoryId":1}',
      415,
      'unsupported_media_type',
    ],
    ['no content type', {}, '{"name":"x","categoryId":1}', 415, 'unsupported_media_type'],
    ['truncated JSON', json, '{"name":', 400, 'malformed_json'],
    ['trailing garbage', json, '{"name":"x","categoryId":1} x', 400, 'malformed_json'],
    ['an empty body', json, '', 400, 'malformed_json'],
    ['__proto__', json, '{"name":"x","categoryId":1,"__proto__":{"admin":true}}', 400, 'malformed_json'],
    [
      'constructor.prototype',
      json,
      '{"name":"x","categoryId":1,"constructor":{"prototype":{"a":1}}}',
      400,
      'malformed_json',
    ],
    ['a NaN', json, '{"name":"x","categoryId":NaN}', 400, 'malformed_json'],
    ['a repeated key', json, '{"name":5,"name":"x","categoryId":1}', 400, 'malformed_json'],
    ['a repeated nested key', json, '{"name":"x","categoryId":1,"a":{"b":1,"b":2}}', 400, 'malformed_json'],
    // The same key spelt with an escape, after a value whose quotes and braces are escaped or quoted.
    ['a repeated escaped key', json, '{"name":"a\\"}{,","categoryId":1,"na\\u006de":"y"}', 400, 'malformed_json'],
  ];
  for (const [what, headers, payload, status, code] of cases) {
    const response = await api.request({
      method: 'POST',
      url: '/v1/pets',
      headers: { ...api.auth, ...headers },
      payload,
    });
    t.equal(response.statusCode, status, what);
    t.equal(response.json<ErrorBody>().code, code, what);
  }
  const messages: [string, string, string | RegExp][] = [
    ['truncated JSON', '{"name":', /^Body is not valid JSON: \S/],
    ['an empty body', '', 'Body is empty but Content-Type is application/json'],
    [
      '__proto__',
      '{"name":"x","categoryId":1,"__proto__":{"admin":true}}',
      'Body may not hold a "__proto__" key, nor "constructor" with "prototype"',
    ],
  ];
  for (const [what, payload, message] of messages) {
    const response = await api.request({ method: 'POST', url: '/v1/pets', headers: { ...api.auth, ...json }, payload });
    t.match(response.json<ErrorBody>().message, message, `${what}: the message says what is wrong`);
  }
  const latin1 = await api.request({
    method: 'POST',
    url: '/v1/pets',
    headers: { ...api.auth, ...json },
    payload: Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xff]), Buffer.from('","categoryId":1}')]),
  });
  t.equal(latin1.statusCode, 400, 'bytes that are not UTF-8 are not replaced');
  t.same(latin1.json(), { code: 'malformed_json', message: 'Body is not valid UTF-8', status: 400 });
  const escaped = await api.request({
    method: 'POST',
    url: '/v1/pets',
    headers: { ...api.auth, ...json },
    payload: '{"name":"a \\"quoted\\" name","categoryId":1,"status":"sold"}',
  });
  t.equal(escaped.statusCode, 201, 'escaped quotes are not mistaken for keys');
  const charset = await api.request({
    method: 'POST',
    url: '/v1/pets',
    headers: { ...api.auth, 'content-type': 'application/json; charset=utf-8' },
    payload: '{"name":"ok","categoryId":1}',
  });
  t.equal(charset.statusCode, 201, 'application/json with a charset is accepted');
  const listed = await api.request({ method: 'GET', url: '/v1/pets', headers: api.auth });
  t.equal(listed.json<unknown[]>().length, 2, 'only the valid bodies were stored');
});

t.test(
  'a compressed body, or a charset other than UTF-8, is a 415 after authentication and stores nothing',
  async (t) => {
    const api = await startApi(t);
    const body = '{"name":"Rex","categoryId":1}';
    const cases: [string, Record<string, string>, string | Buffer][] = [
      ['gzip named, body plain', { ...json, 'content-encoding': 'gzip' }, body],
      ['a real gzip body', { ...json, 'content-encoding': 'gzip' }, gzipSync(body)],
      ['deflate', { ...json, 'content-encoding': 'deflate' }, deflateSync(body)],
      ['br, in capitals', { ...json, 'content-encoding': 'BR' }, body],
      ['identity, then gzip', { ...json, 'content-encoding': 'identity, gzip' }, body],
      ['UTF-16LE', { 'content-type': 'application/json; charset=utf-16le' }, Buffer.from(body, 'utf16le')],
      ['Latin-1', { 'content-type': 'application/json;charset=latin1' }, Buffer.from(body, 'latin1')],
      ['a quoted charset', { 'content-type': 'application/json; charset="ISO-8859-1"' }, body],
      ['CHARSET in capitals', { 'content-type': 'application/json; CHARSET=us-ascii' }, body],
      ['an empty charset', { 'content-type': 'application/json; charset=' }, body],
    ];
    for (const [what, headers, payload] of cases) {
      const anonymous = await api.request({ method: 'POST', url: '/v1/pets', headers, payload });
      t.equal(anonymous.statusCode, 401, `${what}: without a key, the 401 first`);
      const response = await api.request({
        method: 'POST',
        url: '/v1/pets',
        headers: { ...api.auth, ...headers },
        payload,
      });
      t.equal(response.statusCode, 415, what);
      t.equal(response.json<ErrorBody>().code, 'unsupported_media_type', what);
      const coded = 'content-encoding' in headers;
      t.equal(response.headers['accept-encoding'], coded ? 'identity' : undefined, `${what}: Accept-Encoding`);
      t.equal(
        response.json<ErrorBody>().message,
        coded
          ? 'Content-Encoding is not supported: send the body uncompressed'
          : 'The body must be UTF-8: a charset parameter, if sent, must be utf-8',
        what,
      );
    }
    t.equal((await api.storage.pets.list({ limit: 10 })).items.length, 0, 'nothing was stored');

    const accepted: [string, Record<string, string>][] = [
      ['Content-Encoding: identity', { ...json, 'content-encoding': 'Identity' }],
      ['charset=UTF-8', { 'content-type': 'application/json; charset=UTF-8' }],
      ['charset="utf-8"', { 'content-type': 'application/json; charset="utf-8"' }],
      ['another parameter', { 'content-type': 'application/json; x=latin1' }],
    ];
    for (const [what, headers] of accepted) {
      const response = await api.request({
        method: 'POST',
        url: '/v1/pets',
        headers: { ...api.auth, ...headers },
        payload: body,
      });
      t.equal(response.statusCode, 201, what);
    }
  },
);

t.test('a wrong path or method is decided before the body is read or the key checked', async (t) => {
  const api = await startApi(t);
  const cases: [string, string, number][] = [
    ...contractPaths.map(({ url, otherMethod }): [string, string, number] => [otherMethod, url, 405]),
    ['POST', '/v1/nope', 404],
  ];
  for (const [method, url, status] of cases) {
    for (const payload of ['{', 'x'.repeat(20_000)]) {
      const response = await api.request({ method, url, headers: json, payload });
      t.equal(response.statusCode, status, `${method} ${url} with a ${payload.length}-byte body`);
    }
  }
});

t.test('an undecodable URL on a secured operation still needs a key first', async (t) => {
  const api = await startApi(t);
  const anonymous = await api.request({ method: 'GET', url: '/v1/pets/%zz' });
  t.equal(anonymous.statusCode, 401);
  const long = await api.request({ method: 'GET', url: `/v1/pets/${'1'.repeat(150)}` });
  t.equal(long.statusCode, 401, 'a parameter over the router length limit too');
  const keyed = await api.request({ method: 'GET', url: '/v1/pets/%zz', headers: api.auth });
  t.equal(keyed.statusCode, 400);
  t.equal(keyed.json<ErrorBody>().message, 'params/petId is not correctly percent-encoded, or is too long');
  t.ok(keyed.headers['x-request-id'], 'with the usual headers');
  t.equal(keyed.headers['cache-control'], 'no-store');
  t.equal(keyed.headers.deprecation, '@1795305600', "and the operation's own");
  // Nothing is served on these, however their URL decodes: the 404 or 405 of any such path.
  for (const [method, url, status] of [
    ['GET', '/v1/nope%zz', 404],
    ['GET', '/v1/pets/%zz/x', 404],
    ['PUT', '/v1/pets/%zz', 405],
  ] as const) {
    const unroutable = await api.request({ method, url, headers: api.auth });
    t.equal(unroutable.statusCode, status, `${method} ${url}`);
  }
});

t.test('a missing or repeated Host, or a repeated single-value header, is a 400 Error body', async (t) => {
  const api = await startApi(t);
  const { origin } = await listen(t, api);
  const { port } = new URL(origin);
  const cases: [string, string][] = [
    ['no Host', `GET /v1/pets HTTP/1.1\r\nAuthorization: ${api.auth.authorization}\r\n`],
    ['two Hosts', `GET /v1/pets HTTP/1.1\r\nHost: a\r\nHost: b\r\nAuthorization: ${api.auth.authorization}\r\n`],
    [
      'two Authorizations',
      `GET /v1/pets HTTP/1.1\r\nHost: a\r\nAuthorization: ${api.auth.authorization}\r\nAuthorization: x\r\n`,
    ],
    [
      'two Content-Types, spelled differently',
      `GET /v1/pets HTTP/1.1\r\nHost: a\r\nCONTENT-TYPE: application/json\r\nAuthorization: ${api.auth.authorization}\r\ncontent-type: text/plain\r\n`,
    ],
    [
      'two Hosts and a header Node leaves out of request.headers',
      `GET /v1/pets HTTP/1.1\r\nHost: a\r\n__proto__: x\r\nHost: b\r\nAuthorization: ${api.auth.authorization}\r\n`,
    ],
    [
      'two Idempotency-Keys',
      `GET /v1/pets HTTP/1.1\r\nHost: a\r\nIdempotency-Key: k1\r\nAuthorization: ${api.auth.authorization}\r\nidempotency-key: k2\r\n`,
    ],
  ];
  const send = (head: string) => rawExchange(Number(port), `${head}Connection: close\r\n\r\n`);
  for (const [what, head] of cases) {
    const response = parseRawResponse(await send(head));
    assertConforms('GET', '/v1/pets', response);
    t.equal(response.statusCode, 400, what);
    t.equal(response.json<ErrorBody>().code, 'invalid_request', what);
  }

  // Headers that may repeat pass, among them ones as long as a single-value name (Date as Host,
  // Accept-Language as Idempotency-Key), and one Node leaves out of `request.headers` (__proto__).
  const repeatable = parseRawResponse(
    await send(
      `GET /v1/pets HTTP/1.1\r\nHost: a\r\nDate: x\r\nAuthorization: ${api.auth.authorization}\r\n` +
        'date: y\r\nAccept-Language: en\r\naccept-language: fr\r\nAccept: */*\r\nAccept: application/json\r\n' +
        '__proto__: x\r\n',
    ),
  );
  assertConforms('GET', '/v1/pets', repeatable);
  t.equal(repeatable.statusCode, 200, 'headers that may repeat');
});

t.test('an unexpected failure is a 500 Error body that reveals nothing; /readyz reports it', async (t) => {
  const logged: { level: number; msg: string; reqId?: string; url?: string; err?: { message: string } }[] = [];
  const api = await startApi(t, {
    logger: { level: 'info', stream: { write: (line: string) => logged.push(JSON.parse(line) as never) } },
  });
  const ready = await api.app.inject({ method: 'GET', url: '/readyz' });
  t.equal(ready.statusCode, 200);
  const key = api.auth;
  // Authenticate first so the failure happens in the handler, then break the database under it.
  await api.request({ method: 'GET', url: '/v1/pets', headers: key });
  await api.storage.close();
  for (const [method, url, payload] of [
    ['GET', '/v1/pets', undefined],
    ['POST', '/v1/pets', { name: 'x', categoryId: 1 }],
    ['GET', '/v1/pets/1', undefined],
  ] as const) {
    const response = await api.request({ method, url, headers: key, ...(payload === undefined ? {} : { payload }) });
    t.equal(response.statusCode, 500, `${method} ${url}`);
    t.same(response.json(), { code: 'internal_error', message: 'Internal server error', status: 500 });
    t.notMatch(response.body, /sqlite|postgres|database|at |\.js/i, 'no stack trace or internals');
  }
  // The requests' error lines (the delivery worker, whose database is closed too, logs its own).
  const failures = logged.filter((line) => line.level >= 50 && line.reqId !== undefined);
  t.same(
    failures.map(({ msg, url }) => [msg, url]),
    [
      ['request failed', '/v1/pets'],
      ['request failed', '/v1/pets'],
      ['request failed', '/v1/pets/1'],
    ],
    'each failure is logged once, in its request line',
  );
  t.ok(
    failures.every(({ err }) => typeof err?.message === 'string' && err.message !== ''),
    'with the error that caused it',
  );
  const notReady = await api.app.inject({ method: 'GET', url: '/readyz' });
  t.equal(notReady.statusCode, 503);
  t.same(notReady.json(), {
    code: 'service_unavailable',
    message: 'The database is not available; retry shortly',
    status: 503,
  });
  const alive = await api.app.inject({ method: 'GET', url: '/healthz' });
  t.equal(alive.statusCode, 200, '/healthz only says the process is up');
});

t.test("malformed URLs and raw HTTP garbage get Error bodies, never fastify's shape", async (t) => {
  const api = await startApi(t);
  const badUrl = await api.request({ method: 'GET', url: '/v1/pets/%zz', headers: api.auth });
  t.equal(badUrl.statusCode, 400);
  t.equal(badUrl.json<ErrorBody>().code, 'invalid_request');
  t.notMatch(badUrl.body, /statusCode|"error"/);

  const { origin } = await listen(t, api);
  const { port } = new URL(origin);
  const raw = await rawExchange(Number(port), 'GARBAGE / HTTP/1.1\r\n\r\n');
  t.match(raw, /^HTTP\/1\.1 400 /);
  const body = raw.slice(raw.indexOf('\r\n\r\n') + 4);
  t.same(JSON.parse(body), { code: 'invalid_request', message: 'Malformed HTTP request', status: 400 });
});

t.test('CONNECT is answered like any undeclared method, counted, then the connection closed', async (t) => {
  const api = await startApi(t, { metrics: true });
  const { origin } = await listen(t, api);
  const port = Number(new URL(origin).port);
  const pets = contractPath('/pets');
  const cases: [string, number, string | undefined][] = [
    [pets.url, 405, pets.allow],
    ['/healthz', 405, 'GET'],
    ['/v1/nope', 404, undefined],
    ['pets.example:443', 400, undefined],
  ];
  for (const [target, status, allow] of cases) {
    // No Connection: close: the answer's end shows the server closed the connection.
    const response = parseRawResponse(await rawExchange(port, `CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`));
    assertConforms('CONNECT', target, response);
    t.equal(response.statusCode, status, `CONNECT ${target}`);
    t.equal(response.headers.allow, allow, `CONNECT ${target}: Allow`);
    t.equal(response.headers.connection, 'close');
    t.ok(response.headers['x-request-id'], 'with the headers of any answer');
  }
  const text = await api.metrics?.registry.metrics();
  t.match(text, 'petstore_http_requests_total{method="other",operation="unmatched",status="405"} 2');
  t.match(text, 'petstore_http_requests_total{method="other",operation="unmatched",status="400"} 1');

  // Requests pipelined before it are answered first, in order: its answer is not taken for theirs.
  const get = 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n';
  const raw = await rawExchange(port, `${get}${get}CONNECT ${pets.url} HTTP/1.1\r\nHost: x\r\n\r\n`);
  t.same(
    raw.split(/(?=HTTP\/1\.1 )/).map((answer) => answer.slice(0, 12)),
    ['HTTP/1.1 200', 'HTTP/1.1 200', 'HTTP/1.1 405'],
  );
});

t.test('a target in absolute form names its path; one that names no path is a 400', async (t) => {
  const api = await startApi(t);
  const { origin } = await listen(t, api);
  const port = Number(new URL(origin).port);
  const pets = contractPath('/pets');
  const cases: [string, string, string, number][] = [
    [pets.otherMethod, `http://pets.example${pets.url}`, pets.url, 405],
    ['GET', 'http://pets.example/v1/nope', '/v1/nope', 404],
    ['OPTIONS', '*', '*', 400],
  ];
  for (const [method, target, path, status] of cases) {
    const raw = await rawExchange(port, `${method} ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    const response = parseRawResponse(raw);
    assertConforms(method, path, response);
    t.equal(response.statusCode, status, `${method} ${target}`);
  }
});

t.test('requests pipelined before one that cannot be parsed are answered, and only they', async (t) => {
  const api = await startApi(t);
  const { origin } = await listen(t, api);
  const create = (name: string) => {
    const body = JSON.stringify({ name, categoryId: 1 });
    return (
      `POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: ${api.auth.authorization}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`
    );
  };
  const raw = await rawExchange(Number(new URL(origin).port), `${create('First')}${create('Second')}HELLO\r\n\r\n`);
  const answers = raw.split(/(?=HTTP\/1\.1 )/);
  t.same(
    answers.map((answer) => answer.slice(0, 12)),
    ['HTTP/1.1 201', 'HTTP/1.1 201'],
    'two creates, two answers, nothing a client would take for theirs',
  );
  const names = answers.map((answer) => {
    const response = parseRawResponse(answer);
    assertConforms('POST', '/v1/pets', response);
    return response.json<{ name: string }>().name;
  });
  t.same(names, ['First', 'Second'], 'in order');
  t.equal((await api.storage.pets.list({ limit: 10 })).items.length, 2, 'each pet was created once');
});

t.test(
  'every response carries a request id (echoed when sane) and nosniff; API responses are not cached',
  async (t) => {
    const api = await startApi(t);
    const echoed = await api.request({
      method: 'GET',
      url: '/v1/pets',
      headers: { ...api.auth, 'x-request-id': 'abc-123' },
    });
    t.equal(echoed.headers['x-request-id'], 'abc-123');
    t.equal(echoed.headers['x-content-type-options'], 'nosniff');
    t.equal(echoed.headers['cache-control'], 'no-store');
    t.notOk('x-powered-by' in echoed.headers);
    const generated = await api.request({
      method: 'GET',
      url: '/v1/pets',
      headers: { ...api.auth, 'x-request-id': 'bad id\twith spaces' },
    });
    t.match(generated.headers['x-request-id'], /^[0-9a-f-]{36}$/, 'an unsafe id is replaced');
    const error = await api.request({ method: 'GET', url: '/v1/pets' });
    t.ok(error.headers['x-request-id'], 'errors carry it too');
    t.equal(error.headers['cache-control'], 'no-store');
  },
);
