#!/usr/bin/env python3
"""The rule "no library function over ~80 lines unless its README says why" (issue 19).

Lists each function of the library's .c files longer than LIMIT lines, from its signature's
first line to its closing brace. A function may stay long when its folder's README.md names it
on a line that starts "Long on purpose:", e.g.
    Long on purpose: `library_grad` is one switch over the ops, one case each.
Exits 1 when some function is over the limit and not so named; prints them, longest first.
The parse is textual and fits this project's style: a definition's signature starts in column 0
and its body opens with "{" alone on the next line and closes with "}" in column 0.
"""
import glob
import os
import re
import sys

LIMIT = 80
FOLDERS = ['core', 'ops', 'autograd', 'jit', 'io', 'lua',
           'devices/cpu', 'devices/vulkan', 'devices/ref']
SIGNATURE_MAX_LINES = 6  # a signature wrapped over more lines than this is not looked for


def allowed_names(folder):
    """The function names a folder's README.md marks "Long on purpose:"."""
    path = os.path.join(folder, 'README.md')
    names = set()
    if os.path.exists(path):
        with open(path, encoding='utf-8') as f:
            for line in f:
                if line.lstrip('-* ').startswith('Long on purpose:'):
                    names.update(re.findall(r'`(\w+)`', line))
    return names


def long_functions(path):
    """(lines, name) for each function in path whose definition is longer than LIMIT lines."""
    with open(path, encoding='utf-8') as f:
        lines = f.read().split('\n')
    found = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not re.match(r'^[a-zA-Z_]', line):
            i += 1
            continue
        # The signature ends on the line with its closing ")", at most a few lines down.
        end = i
        while (end < len(lines) and end - i < SIGNATURE_MAX_LINES
               and not lines[end].rstrip().endswith(')')):
            end += 1
        if end + 1 < len(lines) and lines[end + 1] == '{' and lines[end].rstrip().endswith(')'):
            close = end + 1
            while close < len(lines) and lines[close] != '}':
                close += 1
            count = close - i + 1
            name = re.search(r'(\w+)\s*\(', line)
            if count > LIMIT:
                found.append((count, name.group(1) if name else line.strip()))
            i = close
        i += 1
    return found


def main():
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
    offenders = []
    for folder in FOLDERS:
        allowed = allowed_names(folder)
        for path in sorted(glob.glob(os.path.join(folder, '*.c'))):
            for count, name in long_functions(path):
                if name not in allowed:
                    offenders.append((count, path, name))
    if offenders:
        print(f'functions over {LIMIT} lines whose README does not say why '
              f'(split them, or add "Long on purpose: `name` ..." to the folder\'s README.md):')
        for count, path, name in sorted(offenders, reverse=True):
            print(f'  {path}: {name} ({count} lines)')
        return 1
    print(f'check_function_length: no library function over {LIMIT} lines '
          'except those their README explains')
    return 0


if __name__ == '__main__':
    sys.exit(main())
