import fc from 'fast-check';
import t from 'tap';
import { pageOf, rowsFor } from '../src/storage/paging.js';

// A list reads one row more than its page shows (rowsFor): that row only says another page follows.

t.test('a page shows the first `limit` rows read, and says whether more follow', async () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 100 }), fc.nat({ max: 101 }), (limit, found) => {
      const read = Array.from({ length: Math.min(found, rowsFor(limit)) }, (_, i) => i + 1);
      const page = pageOf(read, limit);
      return (
        page.hasMore === read.length > limit &&
        JSON.stringify(page.items) === JSON.stringify(read.slice(0, limit)) &&
        pageOf(read, limit, (id) => ({ id })).items.every((item, i) => item.id === page.items[i])
      );
    }),
  );
});
