import fc from 'fast-check';
import t from 'tap';
import { cursorScope, decodeCursor, encodeCursor } from '../src/handlers/cursors.js';
import { ApiError } from '../src/domain/errors.js';

// A cursor names the last id of a page and is bound to its list: the path and its filters.

const petsByStatus = (status: string | undefined) => cursorScope('/v1/pets', { status });

const refusal = (run: () => unknown) => {
  try {
    run();
  } catch (error) {
    return error instanceof ApiError ? `${error.statusCode} ${error.code}: ${error.message}` : String(error);
  }
  return 'accepted';
};

t.test('a cursor gives back the id it names, for the list it was made for', async () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }), fc.string(), (id, status) => {
      const scope = petsByStatus(status);
      return decodeCursor(encodeCursor(id, scope), scope) === id;
    }),
  );
});

t.test('the order filters are given in does not change the list', async (t) => {
  t.equal(cursorScope('/v1/pets', { a: '1', b: '2' }), cursorScope('/v1/pets', { b: '2', a: '1' }));
  t.equal(cursorScope('/v1/pets', { a: '1', b: undefined }), cursorScope('/v1/pets', { a: '1' }));
  t.not(cursorScope('/v1/pets', { a: '1' }), cursorScope('/v1/orders', { a: '1' }));
});

t.test('a cursor made for another list or other filters is a 400 that says so', async (t) => {
  const cursor = encodeCursor(7, petsByStatus('available'));
  t.match(
    refusal(() => decodeCursor(cursor, petsByStatus('sold'))),
    /^400 invalid_request: .*another list/,
  );
  t.match(
    refusal(() => decodeCursor(cursor, petsByStatus(undefined))),
    /^400 invalid_request: .*another list/,
  );
});

t.test('a cursor this service did not issue is a 400, never an id', async (t) => {
  const scope = petsByStatus(undefined);
  const forged = [
    '',
    'abc',
    Buffer.from('v2:0.AAAAAAAA').toString('base64url'),
    Buffer.from('v2:-1.AAAAAAAA').toString('base64url'),
    Buffer.from(`v2:${'9'.repeat(17)}.AAAAAAAA`).toString('base64url'),
    Buffer.from('v1:5').toString('base64url'),
    // Padding reads as the same bytes, but is not what was issued.
    `${encodeCursor(5, scope)}=`,
  ];
  for (const cursor of forged)
    t.match(
      refusal(() => decodeCursor(cursor, scope)),
      /^400 invalid_request/,
      cursor,
    );
  fc.assert(
    fc.property(fc.string(), (cursor) => {
      const outcome = refusal(() => decodeCursor(cursor, scope));
      return outcome.startsWith('400 invalid_request');
    }),
  );
});
