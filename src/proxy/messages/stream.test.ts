import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LineRelay } from '../../upstream/scrub.js';
import { MessagesStream, MessagesTransform, PING_EVENT, WAIT_LIMIT } from './stream.js';

interface Event {
  type: string;
  [k: string]: unknown;
}

/** The events of an Anthropic event stream; each event's name must be its data's type. */
export function parseEvents(sse: string): Event[] {
  const out: Event[] = [];
  for (const raw of sse.split('\n\n')) {
    if (raw === '') continue;
    const m = /^event: ([a-z_]+)\ndata: (.*)$/s.exec(raw);
    if (!m) throw new Error(`not an event: ${JSON.stringify(raw)}`);
    const data = JSON.parse(m[2]) as Event;
    if (data.type !== m[1]) throw new Error(`event ${m[1]} carries type ${data.type}`);
    out.push(data);
  }
  return out;
}

type Block = { type: 'text'; text: string } | { type: 'tool_use'; id: string; name: string; json: string };

/**
 * Checks Anthropic's event grammar and answers the blocks it built: one message_start first;
 * blocks opened and closed one at a time with indexes 0, 1, 2...; deltas only inside the open block
 * and of its type; one message_delta after the last block, then message_stop last. Pings anywhere
 * after message_start.
 */
export function checkGrammar(events: Event[]): { blocks: Block[]; delta: Event } {
  const start = events[0];
  expect(start?.type).toBe('message_start');
  const message = start.message as Record<string, unknown>;
  expect(message).toMatchObject({ type: 'message', role: 'assistant', content: [], stop_reason: null, stop_sequence: null });
  expect(message.id).toMatch(/^msg_/);
  expect(typeof (message.usage as { input_tokens: unknown }).input_tokens).toBe('number');
  const blocks: Block[] = [];
  let open: Block | null = null;
  let delta: Event | null = null;
  for (let i = 1; i < events.length; i++) {
    const e = events[i];
    if (e.type === 'ping') continue;
    expect(delta === null || (e.type === 'message_stop' && i === events.length - 1), `${e.type} after message_delta`).toBe(true);
    if (e.type === 'content_block_start') {
      expect(open, 'a block opened inside another').toBeNull();
      expect(e.index).toBe(blocks.length);
      const cb = e.content_block as Record<string, unknown>;
      if (cb.type === 'text') {
        expect(cb).toEqual({ type: 'text', text: '' });
        open = { type: 'text', text: '' };
      } else {
        expect(cb).toMatchObject({ type: 'tool_use', input: {} });
        expect(typeof cb.id === 'string' && typeof cb.name === 'string').toBe(true);
        open = { type: 'tool_use', id: cb.id as string, name: cb.name as string, json: '' };
      }
      blocks.push(open);
    } else if (e.type === 'content_block_delta') {
      expect(open, 'a delta outside a block').not.toBeNull();
      expect(e.index).toBe(blocks.length - 1);
      const d = e.delta as { type: string; text?: string; partial_json?: string };
      if (open!.type === 'text') {
        expect(d.type).toBe('text_delta');
        open!.text += d.text!;
      } else {
        expect(d.type).toBe('input_json_delta');
        open!.json += d.partial_json!;
      }
    } else if (e.type === 'content_block_stop') {
      expect(open).not.toBeNull();
      expect(e.index).toBe(blocks.length - 1);
      open = null;
    } else if (e.type === 'message_delta') {
      expect(open, 'message_delta inside a block').toBeNull();
      expect(['end_turn', 'max_tokens', 'stop_sequence', 'tool_use', 'refusal']).toContain((e.delta as { stop_reason: string }).stop_reason);
      expect(typeof (e.usage as { output_tokens: unknown }).output_tokens).toBe('number');
      delta = e;
    } else if (e.type !== 'message_stop') throw new Error(`unexpected event ${e.type}`);
  }
  expect(events.at(-1)?.type).toBe('message_stop');
  expect(delta).not.toBeNull();
  return { blocks, delta: delta! };
}

const line = (chunk: unknown) => `data: ${JSON.stringify(chunk)}\n\n`;
const text = (t: string) => line({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: t }, finish_reason: null }] });
const tool = (index: number, args: string, id?: string, name?: string) =>
  line({ choices: [{ index: 0, delta: { tool_calls: [{ index, ...(id ? { id, type: 'function' } : {}), function: { ...(name ? { name } : {}), arguments: args } }] }, finish_reason: null }] });
const finish = (reason: string, extra: Record<string, unknown> = {}) => line({ choices: [{ index: 0, delta: {}, finish_reason: reason, ...extra }] });
const usage = (p: number, c: number) => line({ choices: [], usage: { prompt_tokens: p, completion_tokens: c, total_tokens: p + c } });

function run(chunks: string[], opts: ConstructorParameters<typeof MessagesStream>[0] = { model: 'claude-x' }) {
  const s = new MessagesStream(opts);
  let out = '';
  for (const c of chunks) out += s.push(c);
  out += s.end();
  return { s, out, events: parseEvents(out) };
}

describe('chat stream to Anthropic events', () => {
  it('a text answer: message_start with the model and estimate, one text block, message_delta with the usage, message_stop', () => {
    const { s, events } = run([text('Hel'), text('lo'), finish('stop'), usage(11, 2), 'data: [DONE]\n\n'], { model: 'claude-x', id: 'msg_x', inputTokens: 9 });
    expect(events).toEqual([
      {
        type: 'message_start',
        message: {
          id: 'msg_x',
          type: 'message',
          role: 'assistant',
          model: 'claude-x',
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { input_tokens: 9, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
        },
      },
      { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hel' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'lo' } },
      { type: 'content_block_stop', index: 0 },
      { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { input_tokens: 11, output_tokens: 2 } },
      { type: 'message_stop' },
    ]);
    expect(s.tokens).toEqual({ tokens_in: 11, tokens_out: 2 });
  });

  it('message_start goes out with the first chunk, before anything else comes', () => {
    const s = new MessagesStream({ model: 'm' });
    expect(parseEvents(s.push(': keep-alive\n\n')).map((e) => e.type)).toEqual(['message_start']);
    expect(s.push(text('a')).startsWith('event: content_block_start')).toBe(true);
    expect(s.ping()).toBe(PING_EVENT);
  });

  it('text then parallel tool calls streamed in pieces split mid-JSON, one block after the other', () => {
    const { blocks, delta } = checkGrammar(
      run([text('Let me check.'), tool(0, '', 'call_1', 'get_weather'), tool(0, '{"ci'), tool(0, 'ty": "Par'), tool(0, 'is"}'), tool(1, '{"city":', 'call_2', 'get_weather'), tool(1, '"Rome"}'), finish('tool_calls'), usage(5, 7)]).events,
    );
    expect(blocks).toEqual([
      { type: 'text', text: 'Let me check.' },
      { type: 'tool_use', id: 'call_1', name: 'get_weather', json: '{"city": "Paris"}' },
      { type: 'tool_use', id: 'call_2', name: 'get_weather', json: '{"city":"Rome"}' },
    ]);
    expect(delta).toMatchObject({ delta: { stop_reason: 'tool_use' }, usage: { input_tokens: 5, output_tokens: 7 } });
  });

  it('tool calls whose pieces interleave: the second waits until the first JSON is whole, and no piece is lost', () => {
    const { blocks } = checkGrammar(run([tool(0, '{"a":', 'c1', 'f'), tool(1, '{"b":', 'c2', 'g'), tool(0, '"x\\"}"'), text('note'), tool(1, '2}'), tool(0, '}')]).events);
    expect(blocks).toEqual([
      { type: 'tool_use', id: 'c1', name: 'f', json: '{"a":"x\\"}"}' },
      { type: 'tool_use', id: 'c2', name: 'g', json: '{"b":2}' },
      { type: 'text', text: 'note' },
    ]);
  });

  it('a tool call without an id gets a toolu_ id; the whole call in one chunk is one delta', () => {
    const { blocks, delta } = checkGrammar(run([tool(0, '{"q":1}', undefined, 'f'), finish('stop')]).events);
    expect(blocks[0]).toMatchObject({ type: 'tool_use', name: 'f', json: '{"q":1}' });
    expect((blocks[0] as { id: string }).id).toMatch(/^toolu_/);
    // a server that says "stop" after calling a tool: the app must still run it
    expect(delta).toMatchObject({ delta: { stop_reason: 'tool_use' } });
  });

  it('a tool call whose name comes after its first piece opens once it is known', () => {
    const { blocks } = checkGrammar(run([tool(0, '', 'c1'), tool(0, '{"a"', undefined, 'f'), tool(0, ':1}'), finish('tool_calls')]).events);
    expect(blocks).toEqual([{ type: 'tool_use', id: 'c1', name: 'f', json: '{"a":1}' }]);
  });

  it('what waits behind a tool call whose JSON never closes is bounded: past the limit the call closes as it stands', () => {
    const big = 'x'.repeat(64 * 1024);
    const chunks = [tool(0, '{"a":', 'c1', 'f')];
    for (let i = 0; i * big.length <= WAIT_LIMIT; i++) chunks.push(text(big));
    chunks.push(tool(0, '1}'), text('end'));
    const { blocks } = checkGrammar(run(chunks).events);
    expect(blocks.map((b) => b.type)).toEqual(['tool_use', 'text']);
    expect((blocks[0] as { json: string }).json).toBe('{"a":');
    expect((blocks[1] as { text: string }).text.endsWith('end')).toBe(true);
  });

  it('text and arguments that look like events stay inside their data line', () => {
    const evil = '\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n';
    const { blocks } = checkGrammar(run([text(evil), tool(0, evil, 'c', 'f')]).events);
    expect(blocks).toEqual([
      { type: 'text', text: evil },
      { type: 'tool_use', id: 'c', name: 'f', json: evil },
    ]);
  });

  it('each stop_reason, and a stop sequence the server names', () => {
    const reason = (chunks: string[], stopSequences?: string[]) => checkGrammar(run(chunks, { model: 'm', stopSequences }).events).delta.delta;
    expect(reason([text('a'), finish('length')])).toEqual({ stop_reason: 'max_tokens', stop_sequence: null });
    expect(reason([text('a'), finish('stop', { stop_reason: 'END' })], ['END'])).toEqual({ stop_reason: 'stop_sequence', stop_sequence: 'END' });
    expect(reason([text('a'), finish('stop', { stop_reason: 'END' })])).toEqual({ stop_reason: 'end_turn', stop_sequence: null });
    expect(reason([text('a'), finish('content_filter')])).toEqual({ stop_reason: 'refusal', stop_sequence: null });
    expect(reason([text('a')])).toEqual({ stop_reason: 'end_turn', stop_sequence: null });
  });

  it('the message ends when the usage comes after the finish, and without usage it counts the deltas as output', () => {
    const s = new MessagesStream({ model: 'm' });
    const beforeUsage = s.push(text('a') + finish('stop'));
    expect(parseEvents(beforeUsage).map((e) => e.type)).toEqual(['message_start', 'content_block_start', 'content_block_delta', 'content_block_stop']);
    expect(parseEvents(s.push(usage(3, 1))).map((e) => e.type)).toEqual(['message_delta', 'message_stop']);
    expect(s.done).toBe(true);
    expect(s.end()).toBe('');
    const { events, s: noUsage } = run([text('a'), text('b'), finish('stop'), 'data: [DONE]\n\n']);
    expect(checkGrammar(events).delta.usage).toEqual({ output_tokens: 2 });
    expect(noUsage.tokens).toBeNull();
  });

  it('an empty answer is still a whole message; garbage or an error chunk ends the stream with an error event', () => {
    expect(checkGrammar(run([finish('stop')]).events).blocks).toEqual([]);
    const garbage = run([text('a'), 'data: {not json\n\n', text('b')]).events;
    expect(garbage.map((e) => e.type)).toEqual(['message_start', 'content_block_start', 'content_block_delta', 'error']);
    expect(garbage.at(-1)).toEqual({ type: 'error', error: { type: 'api_error', message: 'The upstream sent a stream event that is not JSON.' } });
    const failed = run([line({ error: { message: 'model crashed' } })]).events;
    expect(failed.at(-1)).toEqual({ type: 'error', error: { type: 'api_error', message: 'model crashed' } });
    const s = new MessagesStream({ model: 'm' });
    s.push(text('a'));
    expect(parseEvents(s.fail('overloaded_error', 'stalled'))).toEqual([{ type: 'error', error: { type: 'overloaded_error', message: 'stalled' } }]);
    expect(s.end() + s.ping()).toBe('');
  });

  it('lines with CRLF, data: without a space, comments and event names are read as the chat stream means', () => {
    const { blocks } = checkGrammar(run([': hi\r\n\r\n', 'event: chunk\r\ndata:' + JSON.stringify({ choices: [{ delta: { content: 'x' } }] }) + '\r\n\r\n']).events);
    expect(blocks).toEqual([{ type: 'text', text: 'x' }]);
  });
});

/** A chat stream of arbitrary text, parallel tool calls split anywhere, interleaved, finish and usage. */
const chatStream = fc
  .record({
    texts: fc.array(fc.string({ maxLength: 8, unit: 'binary' }), { maxLength: 6 }),
    tools: fc.array(
      fc.record({
        args: fc.dictionary(fc.string({ maxLength: 5, unit: 'binary' }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }).map((o) => JSON.stringify(o)),
        cuts: fc.array(fc.nat(), { maxLength: 5 }),
        emptyFirst: fc.boolean(),
        withId: fc.boolean(),
      }),
      { maxLength: 4 },
    ),
    keys: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 60, maxLength: 60 }),
    finish: fc.constantFrom('stop', 'length', 'tool_calls', 'content_filter', null),
    usage: fc.option(fc.tuple(fc.nat(10_000), fc.nat(10_000)), { nil: undefined }),
    done: fc.boolean(),
    batch: fc.integer({ min: 1, max: 4 }),
  })
  .map((g) => {
    // each stream's pieces in its own order, the streams merged in an arbitrary interleaving
    const streams: string[][] = [g.texts.filter((t) => t !== '').map(text)];
    const wanted = g.tools.map((t, i) => {
      const cuts = [...new Set(t.cuts.map((c) => c % (t.args.length + 1)))].sort((a, b) => a - b);
      const pieces: string[] = [];
      let at = 0;
      for (const c of [...cuts, t.args.length]) {
        if (c > at) pieces.push(t.args.slice(at, c));
        at = Math.max(at, c);
      }
      const id = t.withId ? `call_${i}` : undefined;
      const lines = t.emptyFirst ? [tool(i, '', id, `fn${i}`), ...pieces.map((p) => tool(i, p))] : pieces.map((p, k) => (k === 0 ? tool(i, p, id, `fn${i}`) : tool(i, p)));
      streams.push(lines);
      return { id, name: `fn${i}`, args: t.args };
    });
    let k = 0;
    const tagged = streams.flatMap((s) => {
      const keys = s.map(() => g.keys[k++ % g.keys.length]).sort((a, b) => a - b);
      return s.map((l, j) => ({ l, key: keys[j] }));
    });
    tagged.sort((a, b) => a.key - b.key);
    const lines = tagged.map((t) => t.l);
    if (g.finish) lines.push(finish(g.finish));
    if (g.usage) lines.push(usage(...g.usage));
    if (g.done) lines.push('data: [DONE]\n\n');
    const chunks: string[] = [];
    for (let i = 0; i < lines.length; i += g.batch) chunks.push(lines.slice(i, i + g.batch).join(''));
    return { chunks, wanted, text: g.texts.join(''), g };
  });

describe('chat stream to Anthropic events, fuzzed', () => {
  it('any chat stream turns into a valid event sequence that carries all its text and each tool call whole', () => {
    fc.assert(
      fc.property(chatStream, ({ chunks, wanted, text: allText, g }) => {
        const { events } = run(chunks);
        const { blocks, delta } = checkGrammar(events);
        expect(blocks.filter((b) => b.type === 'text').map((b) => (b as { text: string }).text).join('')).toBe(allText);
        const tools = blocks.filter((b) => b.type === 'tool_use') as Extract<Block, { type: 'tool_use' }>[];
        expect(tools.map((t) => t.name).sort()).toEqual(wanted.map((w) => w.name).sort());
        for (const w of wanted) {
          const got = tools.find((t) => t.name === w.name)!;
          expect(got.json).toBe(w.args);
          expect(got.id).toBe(w.id ?? got.id);
          expect(got.id).toMatch(w.id ? /^call_/ : /^toolu_/);
        }
        const stop = (delta.delta as { stop_reason: string }).stop_reason;
        if (g.finish === 'length') expect(stop).toBe('max_tokens');
        else if (wanted.length > 0) expect(stop).toBe('tool_use');
        if (g.usage) expect(delta.usage).toEqual({ input_tokens: g.usage[0], output_tokens: g.usage[1] });
      }),
      { numRuns: 500 },
    );
  });
});

describe('the translator as the stream pump transform', () => {
  it('bytes cut anywhere, even inside a UTF-8 character, come out as the same events, the key scrubbed first', () => {
    const key = 'sk-provider-secret-123456';
    const upstream = Buffer.from(text('héllo ✓ ') + text(`leak ${key}`) + tool(0, '{"k":"é"}', 'c', 'f') + finish('tool_calls') + usage(2, 3) + 'data: [DONE]');
    for (const size of [1, 2, 3, 7, 64]) {
      const t = new MessagesTransform(new LineRelay(key, 1 << 20), new MessagesStream({ model: 'm' }));
      let out = '';
      for (let at = 0; at < upstream.length; at += size) out += t.push(upstream.subarray(at, at + size)) ?? '';
      out += t.end() ?? '';
      expect(out).not.toContain(key);
      const { blocks, delta } = checkGrammar(parseEvents(out));
      expect(blocks[0]).toMatchObject({ type: 'text' });
      expect((blocks[0] as { text: string }).text.startsWith('héllo ✓ leak ')).toBe(true);
      expect(blocks[1]).toEqual({ type: 'tool_use', id: 'c', name: 'f', json: '{"k":"é"}' });
      expect(delta.usage).toEqual({ input_tokens: 2, output_tokens: 3 });
      expect(t.translator.tokens).toEqual({ tokens_in: 2, tokens_out: 3 });
    }
  });
});
