/**
 * The official Anthropic SDK reads what the translator makes: its client is given a fetch that
 * answers with the translator's output (no network), and its own stream accumulator and types
 * must build the message the chat answer meant.
 */
import Anthropic from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import { fromChat } from './from-chat.js';
import { MessagesStream } from './stream.js';

const line = (chunk: unknown) => `data: ${JSON.stringify(chunk)}\n\n`;
const tool = (index: number, args: string, id?: string, name?: string) =>
  line({ choices: [{ index: 0, delta: { tool_calls: [{ index, ...(id ? { id, type: 'function' } : {}), function: { ...(name ? { name } : {}), arguments: args } }] } }] });

/** A client whose every call is answered with `body` (an event stream or JSON). */
function clientAnswering(body: string, contentType: string): Anthropic {
  return new Anthropic({
    apiKey: 'test-key',
    baseURL: 'http://127.0.0.1:9',
    maxRetries: 0,
    fetch: async () => new Response(body, { status: 200, headers: { 'content-type': contentType, 'request-id': 'req_1' } }),
  });
}

describe('the Anthropic SDK accepts the translation', () => {
  it('a translated stream of text, parallel tool calls split mid-JSON and pings, through MessageStream', async () => {
    const s = new MessagesStream({ model: 'claude-x', inputTokens: 3 });
    let sse = s.begin() + s.ping();
    sse += s.push(line({ choices: [{ index: 0, delta: { role: 'assistant', content: 'Checking ' } }] }) + line({ choices: [{ index: 0, delta: { content: 'both.' } }] }));
    sse += s.push(tool(0, '', 'call_1', 'get_weather') + tool(0, '{"city":"Pa'));
    sse += s.ping();
    sse += s.push(tool(1, '{"city":', 'call_2', 'get_weather') + tool(0, 'ris"}') + tool(1, '"Rome"}'));
    sse += s.push(line({ choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] }) + line({ choices: [], usage: { prompt_tokens: 20, completion_tokens: 9 } }) + 'data: [DONE]\n\n');
    sse += s.end();
    const client = clientAnswering(sse, 'text/event-stream');
    const stream = client.messages.stream({ model: 'claude-x', max_tokens: 100, messages: [{ role: 'user', content: 'weather?' }] });
    const texts: string[] = [];
    stream.on('text', (t) => texts.push(t));
    const message = await stream.finalMessage();
    expect(texts.join('')).toBe('Checking both.');
    expect(message.content).toEqual([
      { type: 'text', text: 'Checking both.' },
      { type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Paris' } },
      { type: 'tool_use', id: 'call_2', name: 'get_weather', input: { city: 'Rome' } },
    ]);
    expect(message.stop_reason).toBe('tool_use');
    expect(message.usage).toMatchObject({ input_tokens: 20, output_tokens: 9 });
  });

  it('a translated stream read raw (stream: true) yields the events in Anthropic order', async () => {
    const s = new MessagesStream({ model: 'claude-x' });
    const sse = s.push(line({ choices: [{ index: 0, delta: { content: 'hi' }, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1 } })) + s.end();
    const client = clientAnswering(sse, 'text/event-stream');
    const types: string[] = [];
    for await (const e of await client.messages.create({ model: 'claude-x', max_tokens: 10, stream: true, messages: [{ role: 'user', content: 'x' }] })) types.push(e.type);
    expect(types).toEqual(['message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop']);
  });

  it('a translated error event is raised by the SDK as an API error', async () => {
    const s = new MessagesStream({ model: 'claude-x' });
    const sse = s.push(line({ choices: [{ index: 0, delta: { content: 'hi' } }] })) + s.fail('overloaded_error', 'Upstream provider p stopped sending.');
    const client = clientAnswering(sse, 'text/event-stream');
    await expect(client.messages.stream({ model: 'claude-x', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }).finalMessage()).rejects.toThrow(/overloaded_error|stopped sending/);
  });

  it('a translated whole answer is a Message to the SDK', async () => {
    const answer = {
      choices: [{ index: 0, message: { role: 'assistant', content: 'Sure.', tool_calls: [{ id: 'call_9', type: 'function', function: { name: 'f', arguments: '{"a":[1,2]}' } }] }, finish_reason: 'tool_calls' }],
      usage: { prompt_tokens: 4, completion_tokens: 6 },
    };
    const client = clientAnswering(JSON.stringify(fromChat(answer, { model: 'claude-x' })), 'application/json');
    const message = await client.messages.create({ model: 'claude-x', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] });
    expect(message.content).toEqual([
      { type: 'text', text: 'Sure.' },
      { type: 'tool_use', id: 'call_9', name: 'f', input: { a: [1, 2] } },
    ]);
    expect(message.stop_reason).toBe('tool_use');
    expect(message.usage.input_tokens + message.usage.output_tokens).toBe(10);
  });
});
