import { describe, expect, it } from 'vitest';
import { countTokens, IMAGE_TOKENS } from './count-tokens.js';
import { countTokensRequest } from './schemas.js';

describe('count_tokens estimate', () => {
  it('a token per 4 bytes of what the model reads, an image a flat count whatever its size', () => {
    const text = countTokens(countTokensRequest.parse({ model: 'm', messages: [{ role: 'user', content: 'x'.repeat(400) }] }));
    expect(text.input_tokens).toBe(Math.ceil((400 + 8) / 4));
    const withSystem = countTokens(countTokensRequest.parse({ model: 'm', system: 'y'.repeat(400), messages: [{ role: 'user', content: 'x'.repeat(400) }] }));
    expect(withSystem.input_tokens).toBeGreaterThan(text.input_tokens + 90);
    const image = (bytes: number) =>
      countTokens(countTokensRequest.parse({ model: 'm', messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'A'.repeat(bytes) } }] }] })).input_tokens;
    expect(image(10)).toBe(image(1_000_000));
    expect(image(10)).toBeGreaterThanOrEqual(IMAGE_TOKENS);
  });

  it('tools and tool calls count; max_tokens is not needed', () => {
    const bare = countTokens(countTokensRequest.parse({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }));
    const tools = countTokens(
      countTokensRequest.parse({ model: 'm', messages: [{ role: 'user', content: 'hi' }], tools: [{ name: 'get_weather', description: 'd'.repeat(200), input_schema: { type: 'object' } }] }),
    );
    expect(tools.input_tokens).toBeGreaterThan(bare.input_tokens + 50);
  });
});
