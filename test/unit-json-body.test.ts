import fc from 'fast-check';
import t from 'tap';
import { duplicateKey } from '../src/plugins/json-body.js';

// JSON.parse keeps the last of two equal keys: the scan finds the first key an object holds twice.

t.test('examples', async (t) => {
  t.equal(duplicateKey('{"name":5,"name":"Rex"}'), 'name');
  t.equal(duplicateKey('{"a":{"b":1,"b":2}}'), 'b', 'in a nested object');
  t.equal(duplicateKey('[{"a":1},{"a":2}]'), undefined, 'equal keys in two objects of an array');
  t.equal(duplicateKey('{"a":{"x":1},"b":{"x":1}}'), undefined, 'equal keys in sibling objects');
  t.equal(duplicateKey('{"a":"b","b":"a"}'), undefined, 'a value equal to a key is no key');
  t.equal(duplicateKey('{"na\\u006de":1,"name":2}'), 'name', 'a key spelt with an escape is the same key');
  t.equal(duplicateKey('{"a\\"":1,"a\\\\":2}'), undefined, 'escaped quotes and backslashes are read as such');
  t.equal(duplicateKey('{"a":[1,{"c":1}],"a":2}'), 'a', 'after an array inside the object');
  t.equal(duplicateKey('"name"'), undefined);
});

t.test('a JSON.stringify output holds no duplicate; repeating any of its keys is found', async () => {
  fc.assert(
    fc.property(fc.dictionary(fc.string(), fc.jsonValue(), { minKeys: 1 }), (object) => {
      const json = JSON.stringify(object);
      if (duplicateKey(json) !== undefined) return false;
      const [key] = Object.keys(object);
      const repeated = `${json.slice(0, -1)},${JSON.stringify(key)}:null}`;
      return duplicateKey(repeated) === key;
    }),
  );
  fc.assert(fc.property(fc.jsonValue(), (value) => duplicateKey(JSON.stringify(value)) === undefined));
});
