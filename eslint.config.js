import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

/** The inner layers: they depend on ports, never on an adapter or on the HTTP layer (style §11). */
const INNER_LAYERS = ['src/domain/**', 'src/ports/**', 'src/services/**', 'src/consumers/**'];

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'coverage/', 'data/', 'web/dist/', 'bench/results/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      '@typescript-eslint/no-explicit-any': ['error', { ignoreRestArgs: true }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-control-regex': 'off',
    },
  },
  {
    files: INNER_LAYERS,
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              // Any relative path through a folder named adapters or http (type-only imports too).
              regex: '^\\.{1,2}/(?:.*/)?(?:adapters|http)(?:/|$)',
              message:
                'domain/, ports/, services/ and consumers/ depend on ports only: add a port in src/ports and let the composition pick the adapter.',
            },
          ],
        },
      ],
    },
  },
  {
    // A file does one thing and a function reads in one screen (style §13); blank lines and comments do not count.
    files: ['src/**/*.ts'],
    rules: {
      'max-lines': ['error', { max: 400, skipBlankLines: true, skipComments: true }],
      'max-lines-per-function': ['error', { max: 60, skipBlankLines: true, skipComments: true }],
    },
  },
);
