// ESLint with typescript-eslint's recommended rules (which the code already follows) and React's
// hooks rules for the TUI. Part of `npm test`.
import reactHooks from 'eslint-plugin-react-hooks';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'docs/', 'examples/', 'bench/', 'coverage/'] },
  ...tseslint.configs.recommended,
  {
    plugins: { 'react-hooks': reactHooks },
    rules: {
      'react-hooks/rules-of-hooks': 'error',
      'react-hooks/exhaustive-deps': 'warn',
      // `_` marks a parameter kept for its position; `...rest` destructuring drops the named fields on purpose
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true }],
    },
  },
  {
    // tests read JSON answers loosely
    files: ['test/**', 'src/**/*.test.ts', 'src/**/*.test.tsx'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
