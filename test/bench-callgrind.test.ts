import t from 'tap';
import { parsePerfMap, rangeAt, selfInstructions } from '../scripts/bench/callgrind.js';

// instructions.js compares servers by the instructions each function executed itself; these tests
// hold the reading of callgrind's format (an excerpt as callgrind 3.19 writes it) to that.

const perfMap = [
  '7f0000001000 100 JS:*authenticate file:///src/plugins/auth.js:24:39',
  '7f0000000000 40 Builtin:Foo',
  '',
].join('\n');

const output = [
  '# callgrind format',
  'version: 1',
  'pid: 4242',
  'positions: line',
  'events: Ir',
  'summary: 1900',
  '',
  'ob=(1) ???',
  'fl=(4) ???',
  'fn=(10) 0x00007f0000001010',
  '0 500',
  'cob=(2) /usr/bin/node',
  'cfi=(14) ???',
  'cfn=(11) Builtins_StringEqual',
  'calls=20 0 ',
  '0 860',
  '0 100',
  'fn=(11)',
  '0 860',
  'fn=(12) 0x0000000000000010',
  '+2 30',
  'fi=(15) /src/inlined.js',
  '-1 10',
  'fn=(10)',
  '* 400',
].join('\n');

t.test('a perf map is read in order, and an address is found in the last range written over it', async (t) => {
  const ranges = parsePerfMap(perfMap);
  t.same(
    ranges.map((range) => range.name),
    ['JS:*authenticate file:///src/plugins/auth.js:24:39', 'Builtin:Foo'],
  );
  t.equal(rangeAt(ranges, 0x7f0000001000)?.name, 'JS:*authenticate file:///src/plugins/auth.js:24:39', 'its start');
  t.equal(rangeAt(ranges, 0x7f00000010ff)?.name, 'JS:*authenticate file:///src/plugins/auth.js:24:39', 'its last byte');
  t.equal(rangeAt(ranges, 0x7f0000001100), undefined, 'past its end');
  t.equal(rangeAt(ranges, 0x7f0000000040), undefined, 'between two ranges');
  // V8 threw the first code away and put new code in part of its memory.
  const reused = parsePerfMap(`${perfMap}7f0000001080 10 JS:*later file:///src/app.js:1:1\n`);
  t.equal(rangeAt(reused, 0x7f0000001088)?.name, 'JS:*later file:///src/app.js:1:1', 'the code there now');
});

t.test("each function's own instructions, not its calls', with compiled JavaScript named", async (t) => {
  const costs = selfInstructions(output, parsePerfMap(perfMap));
  t.same(Object.fromEntries(costs), {
    'JS:*authenticate file:///src/plugins/auth.js:24:39': 500 + 100 + 400,
    Builtins_StringEqual: 860,
    // Not in the map: named by its address.
    '0x0000000000000010': 40,
  });
  const total = [...costs.values()].reduce((sum, n) => sum + n, 0);
  t.equal(total, 1900, "the same total as callgrind's summary: every instruction counted once");
});

t.test('output with more than one event or position column is refused rather than misread', async (t) => {
  // With --cache-sim=yes each cost line carries one count per event; --dump-instr=yes adds a position.
  t.throws(() => selfInstructions(output.replace('events: Ir', 'events: Dr Ir Dw')), /events: Ir/);
  t.throws(() => selfInstructions(output.replace('positions: line', 'positions: instr line')), /positions: line/);
});
