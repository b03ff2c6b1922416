import { describe, expect, it } from 'vitest';
import { messagesRequest } from './schemas.js';
import { TOOL_ERROR_PREFIX, toChat, UntranslatableError } from './to-chat.js';

const parse = (body: unknown) => messagesRequest.parse(body);

describe('Messages request to chat request', () => {
  it('system as a string or blocks becomes one system message first', () => {
    const asString = toChat(parse({ model: 'm', max_tokens: 10, system: 'be brief', messages: [{ role: 'user', content: 'hi' }] }));
    expect(asString.messages).toEqual([
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'hi' },
    ]);
    const asBlocks = toChat(
      parse({
        model: 'm',
        max_tokens: 10,
        system: [
          { type: 'text', text: 'one', cache_control: { type: 'ephemeral' } },
          { type: 'text', text: 'two' },
        ],
        messages: [{ role: 'user', content: 'hi' }],
      }),
    );
    expect(asBlocks.messages[0]).toEqual({ role: 'system', content: 'one\n\ntwo' });
  });

  it('maps max_tokens, temperature, top_p, stop_sequences and stream, and drops what the chat format has no place for', () => {
    const chat = toChat(
      parse({
        model: 'claude-x',
        max_tokens: 64,
        temperature: 0.5,
        top_p: 0.9,
        top_k: 5,
        stop_sequences: ['END'],
        stream: true,
        metadata: { user_id: 'u1' },
        thinking: { type: 'enabled', budget_tokens: 1024 },
        context_management: { edits: [] },
        some_beta_field: 1,
        messages: [{ role: 'user', content: [{ type: 'text', text: 'hi', cache_control: { type: 'ephemeral' } }] }],
      }),
      'upstream-model',
    );
    expect(chat).toEqual({
      model: 'upstream-model',
      max_tokens: 64,
      temperature: 0.5,
      top_p: 0.9,
      stop: ['END'],
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'hi' }],
    });
  });

  it('images (base64 as a data URL, and URLs) and text documents become content parts', () => {
    const chat = toChat(
      parse({
        model: 'm',
        max_tokens: 10,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'look' },
              { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } },
              { type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } },
              { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'the doc' }, title: 'Doc' },
              { type: 'document', source: { type: 'content', content: [{ type: 'text', text: 'inner' }] } },
              { type: 'thinking', thinking: 'dropped', signature: 'x' },
            ],
          },
        ],
      }),
    );
    expect(chat.messages).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'look' },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
          { type: 'image_url', image_url: { url: 'https://example.com/a.png' } },
          { type: 'text', text: 'Doc\n\nthe doc' },
          { type: 'text', text: 'inner' },
        ],
      },
    ]);
  });

  it('a PDF or a file id is refused, not silently dropped', () => {
    const pdf = parse({ model: 'm', max_tokens: 1, messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0=' } }] }] });
    expect(() => toChat(pdf)).toThrow(UntranslatableError);
    const file = parse({ model: 'm', max_tokens: 1, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'file', file_id: 'f' } }] }] });
    expect(() => toChat(file)).toThrow(UntranslatableError);
  });

  it('tools, each tool_choice, and disable_parallel_tool_use', () => {
    const base = {
      model: 'm',
      max_tokens: 10,
      messages: [{ role: 'user', content: 'x' }],
      tools: [
        { name: 'get_weather', description: 'Weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } }, cache_control: { type: 'ephemeral' } },
        { type: 'web_search_20250305', name: 'web_search' },
      ],
    };
    const chat = toChat(parse({ ...base, tool_choice: { type: 'auto' } }));
    expect(chat.tools).toEqual([{ type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }]);
    expect(chat.tool_choice).toBe('auto');
    expect(toChat(parse({ ...base, tool_choice: { type: 'any' } })).tool_choice).toBe('required');
    expect(toChat(parse({ ...base, tool_choice: { type: 'none' } })).tool_choice).toBe('none');
    const named = toChat(parse({ ...base, tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true } }));
    expect(named.tool_choice).toEqual({ type: 'function', function: { name: 'get_weather' } });
    expect(named.parallel_tool_calls).toBe(false);
    expect(toChat(parse({ ...base, tools: [] })).tools).toBeUndefined();
  });

  it('tool_use becomes tool_calls and tool_result tool messages, before the rest of the user turn', () => {
    const chat = toChat(
      parse({
        model: 'm',
        max_tokens: 10,
        messages: [
          { role: 'user', content: 'weather in Paris and Rome?' },
          {
            role: 'assistant',
            content: [
              { type: 'thinking', thinking: 'hmm', signature: 's' },
              { type: 'text', text: 'Checking.' },
              { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } },
              { type: 'tool_use', id: 'toolu_2', name: 'get_weather', input: { city: 'Rome' } },
            ],
          },
          {
            role: 'user',
            content: [
              { type: 'text', text: 'here you go' },
              { type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny' },
              { type: 'tool_result', tool_use_id: 'toolu_2', content: [{ type: 'text', text: 'no such' }, { type: 'text', text: 'city' }], is_error: true },
            ],
          },
          { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_3', name: 'noop', input: {} }] },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_3', content: [{ type: 'image', source: { type: 'url', url: 'https://e.com/x.png' } }] }] },
        ],
      }),
    );
    expect(chat.messages).toEqual([
      { role: 'user', content: 'weather in Paris and Rome?' },
      {
        role: 'assistant',
        content: 'Checking.',
        tool_calls: [
          { id: 'toolu_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
          { id: 'toolu_2', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'toolu_1', content: 'sunny' },
      { role: 'tool', tool_call_id: 'toolu_2', content: `${TOOL_ERROR_PREFIX}no such\ncity` },
      { role: 'user', content: 'here you go' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'toolu_3', type: 'function', function: { name: 'noop', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'toolu_3', content: '' },
      { role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://e.com/x.png' } }] },
    ]);
  });

  it('the schema refuses what the translation cannot read, and a known block with the wrong fields', () => {
    expect(messagesRequest.safeParse({ model: 'm', messages: [{ role: 'user', content: 'x' }] }).success).toBe(false); // no max_tokens
    expect(messagesRequest.safeParse({ model: 'm', max_tokens: 1, messages: [] }).success).toBe(false);
    expect(messagesRequest.safeParse({ model: 'm', max_tokens: 1, messages: [{ role: 'tool', content: 'x' }] }).success).toBe(false);
    expect(messagesRequest.safeParse({ model: 'm', max_tokens: 1, messages: [{ role: 'user', content: [{ type: 'text', text: 5 }] }] }).success).toBe(false);
    expect(messagesRequest.safeParse({ model: 'm', max_tokens: 1, messages: [{ role: 'user', content: [{ type: 'tool_result' }] }] }).success).toBe(false);
    expect(messagesRequest.safeParse({ model: 'm', max_tokens: 1, messages: [{ role: 'user', content: [{ type: 'server_tool_use', id: 'x' }] }] }).success).toBe(true);
  });
});
