// `npm run lint`: ESLint's recommended rules over the package's JavaScript
// (src, test, scripts). The TypeScript in test/types is checked by `npm run typecheck`.
import js from '@eslint/js';
import globals from 'globals';

export default [
  { ignores: ['gen/**', 'node_modules/**', 'test/types/**'] },
  js.configs.recommended,
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: {
      ecmaVersion: 2024,
      sourceType: 'module',
      globals: { ...globals.node },
    },
    rules: {
      // A name starting with _ is unused on purpose (`for await (const _ of stream)`), and so
      // is a key destructured next to a ...rest only to leave it out of the rest.
      'no-unused-vars': ['error', { varsIgnorePattern: '^_', ignoreRestSiblings: true }],
    },
  },
];
