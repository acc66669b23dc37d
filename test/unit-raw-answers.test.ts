import t from 'tap';
import { requestTargetIn } from '../src/http/raw-answers.js';

// The request target of a request Node could not parse, read from the chunk it failed on (the
// 'clientError' error's rawPacket): it picks the API version whose words the raw answer uses, so
// anything that is not a whole request line must name no target rather than a wrong one.

const chunk = (text: string) => Buffer.from(text, 'latin1');

t.test('a chunk that begins with a whole request line names its target', async (t) => {
  t.equal(requestTargetIn(chunk('GET /v2/pets HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n')), '/v2/pets');
  t.equal(requestTargetIn(chunk('POST /v1/pets?limit=2 HTTP/1.0\r\n')), '/v1/pets?limit=2', 'with its query');
  t.equal(requestTargetIn(chunk('GET /v2/pets HTTP/1.1\nHost: x\n')), '/v2/pets', 'with bare line feeds');
  t.equal(requestTargetIn(chunk(`GET /v1/pets HTTP/1.1\r\nX-Big: ${'a'.repeat(20_000)}\r\n`)), '/v1/pets');
});

t.test('no chunk, or one that does not begin with a whole request line, names no target', async (t) => {
  const none: [string, unknown][] = [
    ['no chunk', undefined],
    ['not a buffer', 'GET /v2/pets HTTP/1.1\r\n'],
    ['empty', chunk('')],
    ['a piece of a request line', chunk('GET /v2/pets HTT')],
    ['a request line without its end', chunk('GET /v2/pets HTTP/1.1')],
    ['the middle of the headers', chunk('Host: x\r\nNo colon here\r\n\r\n')],
    ['a body', chunk('{"name":"GET /v2/pets HTTP/1.1\r\n"}')],
    ['not HTTP', chunk('HELLO\r\n\r\n')],
    ['no method', chunk(' /v2/pets HTTP/1.1\r\n')],
    ['two spaces', chunk('GET  /v2/pets HTTP/1.1\r\n')],
    ['an HTTP/2 preface', chunk('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n')],
    ['a request line longer than any kept', chunk(`GET /v2/${'a'.repeat(9000)} HTTP/1.1\r\n`)],
  ];
  for (const [what, packet] of none) t.equal(requestTargetIn(packet), undefined, what);
});
