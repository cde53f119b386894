//! The shell examples of a Markdown file, as `readme::` runs them: fenced ```` ```sh ```` blocks,
//! their info-string words, their commands split at the `# →` lines that show what the commands
//! print, and the matching of what they printed against those lines (`…` matches any text). The
//! convention itself is written at the top of `tests/it/readme.rs`.

/// The marker of a line that shows output.
pub const OUTPUT: &str = "# →";
/// Matches any text within a line; a line that is only this matches any number of lines.
pub const ANY: &str = "…";

/// A fenced block of the file.
#[derive(Clone, Debug)]
pub struct Fenced {
    /// 1-based line of the opening fence.
    pub line: usize,
    /// The info string's words (`sh`, `db=postgres`, …).
    pub info: Vec<String>,
    pub body: Vec<String>,
}

/// Every fenced block of `markdown`, in order. A fence may be indented (inside a list item);
/// the body loses the same indentation.
pub fn fenced_blocks(markdown: &str) -> Vec<Fenced> {
    let mut out = Vec::new();
    let mut open: Option<(Fenced, usize, String)> = None;
    for (i, raw) in markdown.lines().enumerate() {
        let indent = raw.len() - raw.trim_start().len();
        let trimmed = raw.trim_start();
        let fence_len = trimmed.chars().take_while(|&c| c == '`').count();
        match open.take() {
            // CommonMark: the info string of a backtick fence holds no backtick (so an inline
            // ```` ```sh ```` at the start of a line opens nothing).
            None if fence_len >= 3 && !trimmed[fence_len..].contains('`') => {
                let info = trimmed[fence_len..]
                    .split_whitespace()
                    .map(str::to_string)
                    .collect();
                let block = Fenced {
                    line: i + 1,
                    info,
                    body: Vec::new(),
                };
                open = Some((block, indent, "`".repeat(fence_len)));
            }
            None => {}
            Some((block, _, fence))
                if trimmed.starts_with(&fence)
                    && trimmed.trim_end().trim_matches('`').is_empty() =>
            {
                out.push(block);
            }
            Some((mut block, indent, fence)) => {
                let cut = raw
                    .char_indices()
                    .take_while(|(j, c)| *j < indent && c.is_whitespace())
                    .count();
                block.body.push(raw[cut..].to_string());
                open = Some((block, indent, fence));
            }
        }
    }
    out
}

/// How a fenced block counts as a shell example.
#[derive(Debug, PartialEq, Eq)]
pub enum ShellForm {
    /// ```` ```sh ````: run.
    Sh,
    /// A shell example in a form the test does not run: what is wrong with it.
    Refused(String),
    /// Not a shell example.
    Other,
}

/// Whether `block` is a shell example.
pub fn shell_form(block: &Fenced) -> ShellForm {
    let lang = block.info.first().map(String::as_str).unwrap_or("");
    match lang {
        "sh" => ShellForm::Sh,
        "bash" | "shell" | "console" | "zsh" | "shell-session" | "shellsession" => {
            ShellForm::Refused(format!("a ```{lang} block: write shell examples as ```sh"))
        }
        "" if block
            .body
            .iter()
            .find(|l| !l.trim().is_empty())
            .is_some_and(|l| l.trim_start().starts_with("$ ")) =>
        {
            ShellForm::Refused(
                "an untagged block of `$ command` lines: write it as ```sh, the output as `# →` \
                 lines"
                    .into(),
            )
        }
        _ => ShellForm::Other,
    }
}

/// Commands and the output the README shows for them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// 1-based line in the file of the segment's first line.
    pub line: usize,
    pub commands: Vec<String>,
    /// The `# →` lines without the marker; empty for the commands after the last group, which
    /// must print nothing.
    pub expected: Vec<String>,
}

/// The block's body split after each group of `# →` lines.
pub fn segments(block: &Fenced) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut current = Segment {
        line: block.line + 1,
        commands: Vec::new(),
        expected: Vec::new(),
    };
    for (i, line) in block.body.iter().enumerate() {
        let trimmed = line.trim_start();
        if let Some(shown) = trimmed.strip_prefix(OUTPUT) {
            current
                .expected
                .push(shown.strip_prefix(' ').unwrap_or(shown).to_string());
            continue;
        }
        if !current.expected.is_empty() {
            let next = Segment {
                line: block.line + 1 + i,
                commands: Vec::new(),
                expected: Vec::new(),
            };
            out.push(std::mem::replace(&mut current, next));
        }
        current.commands.push(line.clone());
    }
    out.push(current);
    out
}

/// Whether the printed `actual` matches the `expected` lines (trailing spaces and trailing empty
/// lines ignored on both sides; `…` as described at [`ANY`]).
pub fn output_matches(expected: &[String], actual: &str) -> bool {
    let norm = |lines: Vec<&str>| -> Vec<String> {
        let mut v: Vec<String> = lines.iter().map(|l| l.trim_end().to_string()).collect();
        while v.last().is_some_and(|l| l.is_empty()) {
            v.pop();
        }
        v
    };
    let want = norm(expected.iter().map(String::as_str).collect());
    let got = norm(actual.lines().collect());
    lines_match(&want, &got)
}

fn lines_match(want: &[String], got: &[String]) -> bool {
    match want.split_first() {
        None => got.is_empty(),
        Some((first, rest)) if first.trim() == ANY => {
            (0..=got.len()).any(|skip| lines_match(rest, &got[skip..]))
        }
        Some((first, rest)) => got
            .split_first()
            .is_some_and(|(line, more)| line_matches(first, line) && lines_match(rest, more)),
    }
}

/// `want` against one line: `…` matches any text, everything else itself.
pub fn line_matches(want: &str, got: &str) -> bool {
    let parts: Vec<&str> = want.split(ANY).collect();
    if parts.len() == 1 {
        return want == got;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if got.len() < first.len() + last.len() || !got.starts_with(first) || !got.ends_with(last) {
        return false;
    }
    let mut rest = &got[first.len()..got.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

#[test]
fn an_ellipsis_matches_any_text_within_a_line_and_alone_any_lines() {
    assert!(line_matches("{\"time\":…}", "{\"time\":17}"));
    assert!(line_matches("a…b…c", "abc"));
    assert!(line_matches("a…b…c", "a-b-b-c"));
    assert!(!line_matches("a…b…c", "a-c"));
    assert!(!line_matches("ab…ba", "aba"));
    assert!(!line_matches("{\"User\":…}", "{\"Moment\":1}"));
    let lines = |s: &[&str]| s.iter().map(|l| l.to_string()).collect::<Vec<_>>();
    assert!(output_matches(&lines(&["a", "…", "z"]), "a\nb\nc\nz\n\n"));
    assert!(output_matches(&lines(&["a", "…", "z"]), "a\nz"));
    assert!(!output_matches(&lines(&["a", "z"]), "a\nb\nz"));
    assert!(!output_matches(&lines(&[]), "printed"));
    assert!(output_matches(&lines(&["", "x"]), "\nx  \n"));
}

#[test]
fn a_block_splits_after_each_group_of_output_lines() {
    let block = fenced_blocks(
        "```` ```sh ```` inline\n\n  ```sh db=postgres\n  a\n  # → 1\n  # → 2\n  b\n  c\n  # →\n  d\n  ```\n",
    );
    assert_eq!(block.len(), 1);
    assert_eq!(block[0].info, ["sh", "db=postgres"]);
    let s = segments(&block[0]);
    let lines = |s: &[&str]| s.iter().map(|l| l.to_string()).collect::<Vec<_>>();
    assert_eq!(s.len(), 3);
    assert_eq!(
        (s[0].commands.clone(), s[0].expected.clone()),
        (lines(&["a"]), lines(&["1", "2"]))
    );
    assert_eq!(
        (s[1].commands.clone(), s[1].expected.clone()),
        (lines(&["b", "c"]), lines(&[""]))
    );
    assert_eq!(
        (s[2].commands.clone(), s[2].expected.clone()),
        (lines(&["d"]), lines(&[]))
    );
    assert_eq!((s[0].line, s[1].line, s[2].line), (4, 7, 10));
    assert_eq!(block[0].line, 3);
}
