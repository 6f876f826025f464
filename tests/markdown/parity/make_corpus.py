"""Write the parity corpus, ``tests/markdown/parity/corpus/*.md`` (run by hand, output committed).

    python tests/markdown/parity/make_corpus.py && node web/scripts/parity.mjs
    python tests/markdown/parity/make_corpus.py --own && node web/scripts/parity.mjs

Sources, one small document per file, named by where it comes from:

* ``feature-<key>-<n>``: every syntax example of every registry feature (features.json);
* ``spec-<section>-<n>``: CommonMark/GFM constructs section by section (written here);
* ``cjk-``, ``math-``, ``table-``, ``image-``, ``link-``: the areas users hit most;
* ``mk-<n>`` / ``mk-<n>-out``: the inputs recorded from Crepe's default configuration
  (``tests/markdown/milkdown_corpus.json``) and the editor's own output for them;
* ``own-<name>``: the shipped editor's own output for the documents above (``--own`` reads
  ``expected/`` after a first parity run and adds those that differ from their input).

The expected outputs come only from the editor (``web/scripts/parity.mjs``), never from here.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
CORPUS = HERE / "corpus"
EXPECTED = HERE / "expected"
U = "123e4567-e89b-12d3-a456-426614174000"
V = "00000000-0000-4000-8000-00000000abcd"

SPEC: dict[str, list[str]] = {
    "tabs": ["\tfoo\tbaz\t\tbim", "  \tfoo\tbaz\t\tbim", "- foo\n\n\tbar", ">\t\tfoo"],
    "thematic": ["***\n---\n___", "+++", "===", "--\n**\n__", " ***\n  ***\n   ***", "_____________________________________",
                 " - - -", " **  * ** * ** * **", "-     -      -      -", "- - - -    ", "_ _ _ _ a\n\na------\n\n---a---",
                 " *-*", "- foo\n***\n- bar", "Foo\n***\nbar", "Foo\n\n---\nbar", "* Foo\n* * *\n* Bar", "- Foo\n- * * *"],
    "atx": ["# foo\n## foo\n### foo\n#### foo\n##### foo\n###### foo", "####### foo", "#5 bolt\n\n#hashtag", "\\## foo",
            "# foo *bar* \\*baz\\*", "#                  foo                     ", " ### foo\n  ## foo\n   # foo", "    # foo",
            "foo\n    # bar", "## foo ##\n  ###   bar    ###", "# foo ##################################\n##### foo ##",
            "### foo ###     ", "### foo ### b", "# foo#", "### foo \\###\n## foo #\\##\n# foo \\#", "****\n## foo\n****",
            "Foo bar\n# baz\nBar foo", "## \n#\n### ###"],
    "setext": ["Foo *bar*\n=========\n\nFoo *bar*\n---------", "Foo *bar\nbaz*\n====", "Foo\n-------------------------\n\nFoo\n=",
               "   Foo\n---\n\n  Foo\n-----\n\n  Foo\n  ===", "Foo\n   ----      ", "Foo\n    ---", "Foo\n= =\n\nFoo\n--- -",
               "Foo  \n-----", "Foo\\\n----", "`Foo\n----\n`\n\n<a title=\"a lot\n---\nof dashes\"/>", "> Foo\n---",
               "> foo\nbar\n===", "- Foo\n---", "Foo\nBar\n---", "---\nFoo\n---\nBar\n---\nBaz", "\n====", "---\n---",
               "- foo\n-----", "    foo\n---", "> foo\n-----", "\\> foo\n------", "Foo\n\nbar\n---\nbaz", "Foo\nbar\n\n---\n\nbaz",
               "Foo\nbar\n* * *\nbaz", "Foo\nbar\n\\---\nbaz"],
    "indented": ["    a simple\n      indented code block", "  - foo\n\n    bar", "1.  foo\n\n    - bar",
                 "    <a/>\n    *hi*\n\n    - one", "    chunk1\n\n    chunk2\n  \n \n \n    chunk3", "    chunk1\n      \n      chunk2",
                 "Foo\n    bar", "    foo\nbar", "# Heading\n    foo\nHeading\n------\n    foo\n----", "        foo\n    bar",
                 "\n    \n    foo\n    \n", "    foo  "],
    "fenced": ["```\n<\n >\n```", "~~~\n<\n >\n~~~", "``\nfoo\n``", "```\naaa\n~~~\n```", "~~~\naaa\n```\n~~~",
               "````\naaa\n```\n``````", "~~~~\naaa\n~~~\n~~~~", "```", "`````\n\n```\naaa", "> ```\n> aaa\n\nbbb",
               "```\n\n  \n```", "```\n```", " ```\n aaa\naaa\n```", "  ```\naaa\n  aaa\naaa\n  ```", "   ```\n   aaa\n    aaa\n  aaa\n   ```",
               "    ```\n    aaa\n    ```", "```\naaa\n  ```", "   ```\naaa\n  ```", "```\naaa\n    ```", "``` ```\naaa",
               "~~~~~~\naaa\n~~~ ~~", "foo\n```\nbar\n```\nbaz", "foo\n---\n~~~\nbar\n~~~\n# baz", "```ruby\ndef foo(x)\n  return 3\nend\n```",
               "````;\n````", "``` aa ```\nfoo", "~~~ aa ``` ~~~\nfoo\n~~~", "```\n``` aaa\n```", "```js\nconst a = '中文'\n```",
               "```\nline with trailing spaces   \n\n\n\nafter blanks\n```"],
    "paragraphs": ["aaa\n\nbbb", "aaa\nbbb\n\nccc\nddd", "aaa\n\n\nbbb", "  aaa\n bbb", "aaa\n             bbb\n                                       ccc",
                   "   aaa\nbbb", "    aaa\nbbb", "aaa     \nbbb     ", "  \n\naaa\n  \n\n# aaa\n\n  "],
    "blockquote": ["> # Foo\n> bar\n> baz", "># Foo\n>bar\n> baz", "   > # Foo\n   > bar\n > baz", "> # Foo\n> bar\nbaz",
                   "> bar\nbaz\n> foo", "> foo\n---", "> - foo\n- bar", ">     foo\n    bar", "> ```\nfoo\n```", "> foo\n    - bar",
                   ">", ">\n>  \n> ", ">\n> foo\n>  ", "> foo\n\n> bar", "> foo\n> bar", "> foo\n>\n> bar", "foo\n> bar",
                   "> aaa\n***\n> bbb", "> bar\nbaz", "> bar\n\nbaz", "> bar\n>\nbaz", "> > > foo\nbar", ">>> foo\n> bar\n>>baz",
                   ">     code\n\n>    not code", "> 引用 **中文**\n>\n> > 嵌套"],
    "list_items": ["A paragraph\nwith two lines.\n\n    indented code\n\n> A block quote.",
                   "1.  A paragraph\n    with two lines.\n\n        indented code\n\n    > A block quote.", "- one\n\n two",
                   "- one\n\n  two", " -    one\n\n     two", " -    one\n\n      two", "   > > 1.  one\n>>\n>>     two",
                   ">>- one\n>>\n  >  > two", "-one\n\n2.two", "- foo\n\n\n  bar", "1.  foo\n\n    ```\n    bar\n    ```\n\n    baz\n\n    > bam",
                   "- Foo\n\n      bar\n\n\n      baz", "123456789. ok", "1234567890. not ok", "0. ok", "003. ok", "-1. not ok",
                   "- foo\n\n      bar", "  10.  foo\n\n           bar", "1.     indented code\n\n   paragraph\n\n       more code",
                   "   foo\n\nbar", "-    foo\n\n  bar", "-  foo\n\n   bar", "-\n  foo\n-\n  ```\n  bar\n  ```\n-\n      baz",
                   "-   \n  foo", "-\n\n  foo", "- foo\n-\n- bar", "- foo\n-   \n- bar", "1. foo\n2.\n3. bar", "*",
                   "foo\n*\n\nfoo\n1.", " 1.  A paragraph\n     with two lines.", "  1.  A paragraph\n      with two lines.",
                   "- foo\n  - bar\n    - baz\n      - boo", "- foo\n - bar\n  - baz\n   - boo", "10) foo\n    - bar", "10) foo\n   - bar",
                   "- - foo", "1. - 2. foo", "- # Foo\n- Bar\n  ---\n  baz"],
    "lists": ["- foo\n- bar\n+ baz", "1. foo\n2. bar\n3) baz", "Foo\n- bar\n- baz", "The number of windows in my house is\n14.  The number of doors is 6.",
              "The number of windows in my house is\n1.  The number of doors is 6.", "- foo\n\n- bar\n\n\n- baz",
              "- foo\n  - bar\n    - baz\n\n\n      bim", "- foo\n- bar\n\n<!-- -->\n\n- baz\n- bim", "-   foo\n\n    notcode\n\n-   foo\n\n<!-- -->\n\n    code",
              "- a\n - b\n  - c\n   - d\n  - e\n - f\n- g", "1. a\n\n  2. b\n\n   3. c", "- a\n - b\n  - c\n   - d\n    - e",
              "1. a\n\n  2. b\n\n    3. c", "- a\n- b\n\n- c", "* a\n*\n\n* c", "- a\n- b\n\n  c\n- d", "- a\n- b\n\n  [ref]: /url\n- d",
              "- a\n- ```\n  b\n\n\n  ```\n- c", "- a\n  - b\n\n    c\n- d", "* a\n  > b\n  >\n* c", "- a\n  > b\n  ```\n  c\n  ```\n- d",
              "- a", "- a\n  - b", "1. ```\n   foo\n   ```\n\n   bar", "* foo\n  * bar\n\n  baz", "- a\n  - b\n  - c\n\n- d\n  - e\n  - f",
              "2. two\n3. three", "1. one\n\n   1. nested\n   2. nested two", "- x\n\n  ***\n- y", "- x\n  ***\n- y",
              "- [ ] a\n- [x] b\n  - [ ] c", "1. [ ] ordered task", "- [ ]\n- [x]", "- [ ] # not a heading", "- [x]  two spaces",
              "-  [ ] indented", "- [X] capital", "* [ ] star\n+ [x] plus"],
    "backslash": ["\\!\\\"\\#\\$\\%\\&\\'\\(\\)\\*\\+\\,\\-\\.\\/\\:\\;\\<\\=\\>\\?\\@\\[\\\\\\]\\^\\_\\`\\{\\|\\}\\~",
                  "\\\t\\A\\a\\ \\3\\φ\\«", "\\*not emphasized*\n\\<br/> not a tag\n\\[not a link](/foo)\n\\`not code`\n1\\. not a list\n\\* not a list\n\\# not a heading\n\\[foo]: /url \"not a reference\"\n\\&ouml; not a character entity",
                  "\\\\*emphasis*", "foo\\\nbar", "`` \\[\\` ``", "    \\[\\]", "~~~\n\\[\\]\n~~~", "<https://example.com?find=\\*>",
                  "[foo](/bar\\* \"ti\\*tle\")", "``` foo\\+bar\nfoo\n```", "a \\\\ b \\\\\\ c", "C:\\path\\to\\file"],
    "entities": ["&nbsp; &amp; &copy; &AElig; &Dcaron;\n&frac34; &HilbertSpace; &DifferentialD;\n&ClockwiseContourIntegral; &ngE;",
                 "&#35; &#1234; &#992; &#0;", "&#X22; &#XD06; &#xcab;", "&nbsp &x; &#; &#x;\n&#87654321;\n&#abcdef0;\n&ThisIsNotDefined; &hi?;",
                 "&copy", "&MadeUpEntity;", "[foo](/f&ouml;&ouml; \"f&ouml;&ouml;\")", "`f&ouml;&ouml;`", "    f&ouml;f&ouml;",
                 "&#42;foo&#42;\n*foo*", "&#42; foo\n\n* foo", "foo&#10;&#10;bar", "&#9;foo", "[a](url &quot;tit&quot;)", "AT&T and a & b"],
    "code_spans": ["`foo`", "`` foo ` bar ``", "` `` `", "`  ``  `", "` a`", "` b `", "` `\n`  `", "``\nfoo\nbar  \nbaz\n``",
                   "``\nfoo \n``", "`foo   bar \nbaz`", "`foo\\`bar`", "``foo`bar``", "` foo `` bar `", "*foo`*`", "[not a `link](/foo`)",
                   "`<a href=\"`\">`", "`<https://foo.bar.`baz>`", "```foo``", "`foo", "`foo``bar``", "`中文 code`", "a `|` b"],
    "emphasis": ["*foo bar*", "a * foo bar*", "a*\"foo\"*", "* a *", "*$*alpha.\n\n*£*bravo.\n\n*€*charlie.", "foo*bar*", "5*6*78",
                 "_foo bar_", "_ foo bar_", "a_\"foo\"_", "foo_bar_", "5_6_78", "пристаням_стремятся_", "aa_\"bb\"_cc", "foo-_(bar)_",
                 "_foo*", "*foo bar *", "*foo bar\n*", "*(*foo)", "*(*foo*)*", "*foo*bar", "_foo bar _", "_(_foo)", "_(_foo_)_",
                 "_foo_bar", "_пристаням_стремятся", "_foo_bar_baz_", "_(bar)_.", "**foo bar**", "** foo bar**", "a**\"foo\"**",
                 "foo**bar**", "__foo bar__", "__ foo bar__", "__\nfoo bar__", "a__\"foo\"__", "foo__bar__", "5__6__78",
                 "__foo, __bar__, baz__", "foo-__(bar)__", "**foo bar **", "**(**foo)", "*(**foo**)*", "**foo \"*bar*\" foo**",
                 "**foo**bar", "__foo bar __", "__(__foo)", "_(__foo__)_", "__foo__bar", "__foo__bar__baz__", "__(bar)__.",
                 "*foo [bar](/url)*", "*foo\nbar*", "_foo __bar__ baz_", "_foo _bar_ baz_", "__foo_ bar_", "*foo *bar**",
                 "*foo **bar** baz*", "*foo**bar**baz*", "*foo**bar*", "***foo** bar*", "*foo **bar***", "*foo**bar***",
                 "foo***bar***baz", "foo******bar*********baz", "*foo **bar *baz* bim** bop*", "*foo [*bar*](/url)*", "** is not an empty emphasis",
                 "**** is not an empty strong emphasis", "**foo [bar](/url)**", "**foo\nbar**", "__foo _bar_ baz__", "__foo __bar__ baz__",
                 "____foo__ bar__", "**foo **bar****", "**foo *bar* baz**", "**foo*bar*baz**", "***foo* bar**", "**foo *bar***",
                 "**foo *bar **baz**\nbim* bop**", "**foo [*bar*](/url)**", "__ is not an empty emphasis", "____ is not an empty strong emphasis",
                 "foo ***", "foo *\\**", "foo *_*", "foo *****", "foo **\\***", "foo **_**", "**foo*", "*foo**", "***foo**", "****foo*",
                 "**foo***", "*foo****", "foo ___", "foo _\\__", "foo _*_", "foo _____", "foo __\\___", "foo __*__", "__foo_", "_foo__",
                 "___foo__", "____foo_", "__foo___", "_foo____", "**foo**", "*_foo_*", "__foo__", "_*foo*_", "****foo****", "____foo____",
                 "******foo******", "***foo***", "_____foo_____", "*foo _bar* baz_", "*foo __bar *baz bim__ bam*", "**foo **bar baz**",
                 "*foo *bar baz*", "*[bar*](/url)", "_foo [bar_](/url)", "*a `*`*", "_a `_`_", "**a<https://foo.bar/?q=**>",
                 "__a<https://foo.bar/?q=__>", "**粗体**和*斜体*", "中文**粗体**中文", "a**b**c", "__init__.py and _private", "snake_case_word"],
    "links": ["[link](/uri \"title\")", "[link](/uri)", "[](./target.md)", "[link]()", "[link](<>)", "[]()", "[link](/my uri)",
              "[link](</my uri>)", "[link](foo\nbar)", "[a](<b)c>)", "[link](<foo\\>)", "[a](<b)c\n[a](<b)c>\n[a](<b>c)", "[link](\\(foo\\))",
              "[link](foo(and(bar)))", "[link](foo(and(bar))", "[link](foo\\(and\\(bar\\))", "[link](<foo(and(bar)>)", "[link](foo\\)\\:)",
              "[link](#fragment)\n\n[link](https://example.com#fragment)\n\n[link](https://example.com?foo=3#frag)", "[link](foo\\bar)",
              "[link](foo%20b&auml;)", "[link](\"title\")", "[link](/url \"title\")\n[link](/url 'title')\n[link](/url (title))",
              "[link](/url \"title \\\"&quot;\")", "[link](/url \"title\")", "[link](/url \"title \"and\" title\")",
              "[link](/url 'title \"and\" title')", "[link](   /uri\n  \"title\"  )", "[link] (/uri)", "[link [foo [bar]]](/uri)",
              "[link] bar](/uri)", "[link [bar](/uri)", "[link \\[bar](/uri)", "[link *foo **bar** `#`*](/uri)", "[![moon](moon.jpg)](/uri)",
              "[foo [bar](/uri)](/uri)", "[foo *[bar [baz](/uri)](/uri)*](/uri)", "![[[foo](uri1)](uri2)](uri3)", "*[foo*](/uri)",
              "[foo *bar](baz*)", "*foo [bar* baz]", "[foo <bar attr=\"](baz)\">", "[foo`](/uri)`", "[foo<https://example.com/?search=](uri)>",
              "[foo][bar]\n\n[bar]: /url \"title\"", "[link [foo [bar]]][ref]\n\n[ref]: /uri", "[foo][BaR]\n\n[bar]: /url \"title\"",
              "[ẞ]\n\n[SS]: /url", "[Foo\n  bar]: /url\n\n[Baz][Foo bar]", "[foo] [bar]\n\n[bar]: /url \"title\"", "[foo]\n[bar]\n\n[bar]: /url \"title\"",
              "[foo]: /url1\n\n[foo]: /url2\n\n[bar][foo]", "[bar][foo\\!]\n\n[foo!]: /url", "[foo][ref[]\n\n[ref[]: /uri",
              "[foo][]\n\n[foo]: /url \"title\"", "[*foo* bar][]\n\n[*foo* bar]: /url \"title\"", "[foo]\n\n[foo]: /url \"title\"",
              "[*foo* bar]\n\n[*foo* bar]: /url \"title\"", "[[*foo* bar]]\n\n[*foo* bar]: /url \"title\"", "[foo] bar\n\n[foo]: /url",
              "\\[foo]\n\n[foo]: /url \"title\"", "[foo*]: /url\n\n*[foo*]", "[foo][bar][baz]\n\n[baz]: /url", "[foo]: /url\n\nno use",
              "[link](http://a.b/c?x=1&y=2)", "[x](http://example.com/a_b_c)", "[中文链接](https://例子.中国/路径)"],
    "images": ["![foo](/url \"title\")", "![foo *bar*]\n\n[foo *bar*]: train.jpg \"train & tracks\"", "![foo ![bar](/url)](/url2)",
               "![foo [bar](/url)](/url2)", "![foo *bar*][]\n\n[foo *bar*]: train.jpg \"train & tracks\"", "![foo](train.jpg)",
               "My ![foo bar](/path/to/train.jpg  \"title\"   )", "![foo](<url>)", "![](/url)", "![foo][bar]\n\n[bar]: /url",
               "![foo] \n[]\n\n[foo]: /url \"title\"", "!\\[foo]\n\n[foo]: /url \"title\"", "\\![foo]\n\n[foo]: /url \"title\""],
    "autolinks": ["<http://foo.bar.baz>", "<https://foo.bar.baz/test?q=hello&id=22&boolean>", "<irc://foo.bar:2233/baz>",
                  "<MAILTO:FOO@BAR.BAZ>", "<a+b+c:d>", "<made-up-scheme://foo,bar>", "<https://../>", "<localhost:5001/foo>",
                  "<https://foo.bar/baz bim>", "<https://example.com/\\[\\>", "<foo@bar.example.com>", "<foo+special@Bar.baz-bar0.com>",
                  "<foo\\+@bar.example.com>", "<>", "< https://foo.bar >", "<m:abc>", "<foo.bar.baz>", "https://example.com",
                  "foo@bar.example.com", "www.commonmark.org", "Visit www.commonmark.org/help for more information.",
                  "Visit www.commonmark.org.\n\nVisit www.commonmark.org/a.b.", "www.google.com/search?q=Markup+(business)",
                  "www.google.com/search?q=(business))+ok", "www.commonmark.org/he<lp", "https://www.example.com/path?x=1#frag",
                  "foo@bar.baz", "hello@mail+xyz.example isn't valid, but hello+xyz@mail.example is.", "a.b-c_d@a.b\n\na.b-c_d@a.b.\n\na.b-c_d@a.b-\n\na.b-c_d@a.b_",
                  "请访问 https://example.com 了解", "邮箱 a@b.co 联系"],
    "hard_breaks": ["foo  \nbaz", "foo\\\nbaz", "foo       \nbaz", "foo  \n     bar", "foo\\\n     bar", "*foo  \nbar*", "*foo\\\nbar*",
                    "`code  \nspan`", "foo\\", "foo  ", "### foo\\", "### foo  ", "foo\nbaz", "foo \n baz", "中文  \n换行"],
    "text": ["hello $.;'there", "Foo χρῆν", "Multiple     spaces", "5 * 3 = 15 and 2 < 3 > 1", "a | b | c", "1) not a list\n\n1. list",
             "+ plus at start", "= equals at start", "trailing backslash \\", "price $5 and $6", "~tilde~ and ~~strike~~ and ~~~three~~~",
             "a~b~c", "em—dash “quotes” ‘single’ …", "100% & more # hash", "@mention #tag", "http://not-linked?", "ftp://x.y/z"],
}

CJK = [
    "中文段落，包含**粗体**、*斜体*和`代码`。",
    "# 一级标题\n\n## 二级标题\n\n正文内容。",
    "- 列表项一\n- 列表项二\n  - 嵌套项",
    "1. 第一步\n2. 第二步\n3. 第三步",
    "> 引用中文\n> 第二行",
    "| 名称 | 说明 |\n| --- | --- |\n| 苹果 | 水果 |\n| 白菜 | 蔬菜 |",
    "日本語のテキストと한국어 텍스트",
    "全角标点：（括号）【方括号】《书名号》",
    "中英混排 English 和 中文 mixed",
    "链接：[中文文档](openkb://document/" + U + ")",
    "图片：![示意图](asset://" + U + ")",
    "脚注示例[^注1]\n\n[^注1]: 这是脚注。",
    "~~删除线~~和普通文字",
    "- [ ] 待办事项\n- [x] 已完成",
    "```python\nprint('你好')\n```",
    "数学 $E=mc^2$ 公式",
    "表情 😀 和 emoji 👍",
    "中文*强调*中文 和 中文**加粗**中文",
    "全角空格　在这里",
    "繁體中文內容測試",
]

MATH = [
    "$x^2$", "$$x^2$$", "text $a+b$ text", "$$\n\\sum_{i=1}^n i\n$$", "$$\nE=mc^2\n$$\n\nafter", "$ x $", "$$ x $$",
    "a $x$ b $y$ c", "```latex\n\\int_0^1 x\\,dx\n```", "> $$\n> x\n> $$", "- $$\n  x\n  $$", "$a\\$b$", "price $5",
    "$$\n\\begin{aligned}\na &= b \\\\\nc &= d\n\\end{aligned}\n$$", "$\\frac{1}{2}$ 中文", "$$\n$$", "text $$x$$ text",
]

TABLES = [
    "| a | b |\n| - | - |\n| 1 | 2 |", "| a |\n| - |", "|a|b|\n|:-|-:|\n|1|2|", "| left | center | right |\n| :--- | :---: | ---: |\n| l | c | r |",
    "| a | b |\n| --- | --- |\n| only one |", "| a | b |\n| --- | --- |\n| 1 | 2 | 3 |", "| `code` | **b** | *i* |\n| - | - | - |\n| [l](u) | ~~s~~ | $x$ |",
    "| a \\| b | c |\n| - | - |\n| d | e |", "| 中文 | x |\n| - | - |\n| 很长的中文内容 | y |", "| a | b |\n| - | - |\n|  | x |",
    "a | b\n-- | --\n1 | 2", "| 😀 | b |\n|---|---|\n| x | y |", "Para\n\n| a |\n| - |\n| b |\n\nPara", "| a |\n| - |\n| www.x.com |",
    "| x |\n| :-: |\n| centered long text |", "> | a |\n> | - |\n> | b |", "- | a |\n  | - |\n  | b |",
]

IMAGES = [
    "![alt](a.png)", "![alt](a.png \"title\")", "![](a.png)", "![](a.png \"caption\")", "![1.00](a.png)", "![1.50](a.png \"c\")",
    "![0.50](a.png)", "![2](a.png)", "![1.5](a.png)", "![0.00](a.png)", "![图片说明](asset://" + U + ")",
    "![alt](asset://" + U + " \"标题\")", "text ![inline](a.png) text", "![a](a.png) ![b](b.png)", "![alt *em*](a.png)",
    "![alt [x]](a.png)", "![a\\*b](a.png)", "![alt](<a b.png>)", "![alt](a(1).png)", "> ![alt](a.png)", "- ![alt](a.png)",
    "- item\n\n  ![alt](a.png)", "![alt](a.png)\n\ntext after", "text before\n\n![alt](a.png)", "[![alt](a.png)](http://x)",
    "![alt](a.png)\n![b](b.png)", "**![alt](a.png)**", "![10.00](a.png)", "![alt_with_underscore](a.png)", "![](a.png)\n\n![](b.png)",
    "![2024](a.png)", "![alt](https://example.com/x.png?a=1&b=2)", "| ![i](a.png) |\n| - |\n| x |",
]

LINKS = [
    f"[文档](openkb://document/{U})", f"[doc](openkb://document/{U} \"t\")", f"see [a](openkb://document/{U}) and [b](openkb://document/{V})",
    f"[file](asset://{U})", f"<openkb://document/{U}>", f"- [x] [task link](openkb://document/{U})", f"**[bold](openkb://document/{U})**",
    f"[**bold**](openkb://document/{U})", "[a](http://x.com) [a](http://x.com)", "[a ](http://x.com)", "[ a](http://x.com)",
    "[link](http://a.b \"title with \\\"quotes\\\"\")", "[l](mailto:a@b.co)", "[a@b.co](mailto:a@b.co)", "[https://x.org](https://x.org)",
    "[x](https://x.org)", "[](http://empty.text)", "[text](#anchor)", "[text](../relative/path.md)",
]

EMPTY_AND_BLANK = ["", "\n", "\n\n\n", "   ", "a\n\n\n\n\nb", "a\n\n<br />\n\nb", "<br />", "a\n\n<br />", "- a\n- <br />\n- b",
                   "# \n\ntext", "text\n\n\n", "> \n\n> a"]


def feature_docs() -> dict[str, str]:
    reg = json.loads((ROOT / "openkb/markdown/features.json").read_text())
    out = {}
    for f in reg["features"]:
        for i, syntax in enumerate(f["markdown_syntax"]):
            doc = syntax.replace("{uuid}", U)
            out[f"feature-{f['key']}-{i}"] = doc
            out[f"feature-{f['key']}-{i}-in-text"] = "Before.\n\n" + doc + "\n\nAfter."
    return out


def main() -> None:
    docs: dict[str, str] = {}
    docs.update(feature_docs())
    for section, items in SPEC.items():
        for i, md in enumerate(items):
            docs[f"spec-{section}-{i:03d}"] = md
    for prefix, items in (("cjk", CJK), ("math", MATH), ("table", TABLES), ("image", IMAGES), ("link", LINKS),
                          ("blank", EMPTY_AND_BLANK)):
        for i, md in enumerate(items):
            docs[f"{prefix}-{i:03d}"] = md
    recorded = json.loads((HERE.parent / "milkdown_corpus.json").read_text())
    for i, case in enumerate(recorded["cases"] + recorded["divergent"]):
        docs[f"mk-{i:03d}"] = case["input"]
        if case["milkdown"] != case["input"]:
            docs[f"mk-{i:03d}-out"] = case["milkdown"]
    if "--own" in sys.argv:
        for p in sorted(EXPECTED.glob("*.md")):
            name = p.stem
            if name.startswith("own-") or name not in docs:
                continue
            out = p.read_text()
            if out != docs[name]:
                docs["own-" + name] = out
    CORPUS.mkdir(parents=True, exist_ok=True)
    for old in CORPUS.glob("*.md"):
        if old.stem not in docs:
            old.unlink()
    for name, md in docs.items():
        if not re.fullmatch(r"[a-z0-9_-]+", name):
            raise ValueError(name)
        (CORPUS / f"{name}.md").write_text(md)
    print(f"{len(docs)} corpus documents in {CORPUS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
