import { describe, expect, it } from 'vitest';
import { fromChat, MalformedAnswerError, newId } from './from-chat.js';

const answer = (message: Record<string, unknown>, finish: string | null, extra: Record<string, unknown> = {}) => ({
  id: 'chatcmpl-1',
  object: 'chat.completion',
  choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: finish, ...extra }],
  usage: { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17 },
});

describe('chat completion to Message', () => {
  it('text, usage and an end_turn', () => {
    const m = fromChat(answer({ content: 'Hello' }, 'stop'), { model: 'claude-x', id: 'msg_1' });
    expect(m).toEqual({
      id: 'msg_1',
      type: 'message',
      role: 'assistant',
      model: 'claude-x',
      content: [{ type: 'text', text: 'Hello' }],
      stop_reason: 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: 12, output_tokens: 5, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
    });
  });

  it('tool calls become tool_use blocks with their ids and parsed input', () => {
    const m = fromChat(
      answer(
        {
          content: null,
          tool_calls: [
            { id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
            { type: 'function', function: { name: 'noop', arguments: 'not json' } },
          ],
        },
        'tool_calls',
      ),
      { model: 'm' },
    );
    expect(m.id).toMatch(/^msg_[A-Za-z0-9_-]{24}$/);
    expect(m.stop_reason).toBe('tool_use');
    expect(m.content[0]).toEqual({ type: 'tool_use', id: 'call_a', name: 'get_weather', input: { city: 'Paris' } });
    expect(m.content[1]).toMatchObject({ type: 'tool_use', name: 'noop', input: {} });
    expect((m.content[1] as { id: string }).id).toMatch(/^toolu_/);
  });

  it('each stop_reason: length, tool calls under "stop", content_filter, and a stop sequence the server names', () => {
    expect(fromChat(answer({ content: 'a' }, 'length'), { model: 'm' }).stop_reason).toBe('max_tokens');
    expect(fromChat(answer({ content: '', tool_calls: [{ id: 'c', function: { name: 'f', arguments: '{}' } }] }, 'stop'), { model: 'm' }).stop_reason).toBe('tool_use');
    expect(fromChat(answer({ content: '' }, 'content_filter'), { model: 'm' }).stop_reason).toBe('refusal');
    const vllm = fromChat(answer({ content: 'a' }, 'stop', { stop_reason: 'END' }), { model: 'm', stopSequences: ['END'] });
    expect([vllm.stop_reason, vllm.stop_sequence]).toEqual(['stop_sequence', 'END']);
    const sglang = fromChat(answer({ content: 'a' }, 'stop', { matched_stop: 'END' }), { model: 'm', stopSequences: ['END'] });
    expect(sglang.stop_reason).toBe('stop_sequence');
    // a token id, or a stop string the app did not ask for, is a natural end
    expect(fromChat(answer({ content: 'a' }, 'stop', { stop_reason: 128009 }), { model: 'm', stopSequences: ['END'] }).stop_reason).toBe('end_turn');
    expect(fromChat(answer({ content: 'a' }, 'stop', { stop_reason: '</s>' }), { model: 'm', stopSequences: ['END'] }).stop_reason).toBe('end_turn');
  });

  it('an answer with no choice is malformed', () => {
    expect(() => fromChat({ error: 'x' }, { model: 'm' })).toThrow(MalformedAnswerError);
    expect(() => fromChat(null, { model: 'm' })).toThrow(MalformedAnswerError);
    expect(() => fromChat({ choices: [{}] }, { model: 'm' })).toThrow(MalformedAnswerError);
  });
});

describe('message and tool ids', () => {
  it('are of Anthropic\'s shape and never repeat, across many draws of the random pool', () => {
    const ids = new Set<string>();
    for (let i = 0; i < 2000; i++) {
      const id = newId(i % 2 ? 'msg_' : 'toolu_');
      expect(id).toMatch(/^(msg_|toolu_)[A-Za-z0-9_-]{24}$/);
      ids.add(id.slice(id.indexOf('_') + 1));
    }
    expect(ids.size).toBe(2000);
  });
});
