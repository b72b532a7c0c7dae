use super::*;
use crate::ops::resolve::templates::bounds::{MAX_DEPTH, MAX_VALUE_BYTES, MAX_WORK};
use crate::ops::resolve::templates::built::Built;

/// The Technical Manual's example (§11.2): URLs of the base handle get the
/// extension as query parameters, other values are copied.
const MANUAL: &str = r#"<namespace>
  <template delimiter="@">
    <foreach>
      <if value="type" test="equals" expression="URL">
        <if value="extension" test="matches"
            expression="box\(([^,]*),([^,]*),([^,]*),([^,]*)\)" parameter="x">
          <value data="${data}?wh=${x[4]}&amp;ww=${x[3]}&amp;wy=${x[2]}&amp;wx=${x[1]}"/>
        </if>
        <else>
          <value data="${data}?${x}" />
        </else>
      </if>
      <else>
        <value />
      </else>
    </foreach>
  </template>
</namespace>"#;

fn base() -> Vec<HandleValue> {
    vec![HandleValue::new(1, "URL", "http://example.org/data/abc"), HandleValue::new(2, "EMAIL", "contact@example.org")]
}

fn run(xml: &str, base: &[HandleValue], extension: &str) -> (Outcome, Vec<(i32, String, String)>) {
    let refs = HashMap::new();
    run_with(xml, base, extension, &refs)
}

fn run_with(
    xml: &str,
    base: &[HandleValue],
    extension: &str,
    refs: &HashMap<(i32, String), Option<String>>,
) -> (Outcome, Vec<(i32, String, String)>) {
    let mut budget = Budget::default();
    let (outcome, out) = build(xml, base, extension, refs, &mut budget);
    let shown = out
        .into_values()
        .iter()
        .map(|v| (v.index, String::from_utf8_lossy(&v.value_type).into(), String::from_utf8_lossy(&v.data).into()))
        .collect();
    (outcome, shown)
}

/// One pass over `xml` compiled, as the resolution source makes it.
fn build(
    xml: &str,
    base: &[HandleValue],
    extension: &str,
    refs: &HashMap<(i32, String), Option<String>>,
    budget: &mut Budget,
) -> (Outcome, Built) {
    let namespace = match compiled::compile(xml, false, budget) {
        Ok(namespace) => namespace.expect("XML"),
        Err(bound) => return (Outcome::Refused(bound), Built::default()),
    };
    let builder = Builder { base_values: base, case_sensitive: false, refs };
    let h = format!("1234/abc@{extension}");
    let (mut params, mut out) = (Params::new(&h, "1234/abc", extension), Built::default());
    let mut pass = Pass::new(&mut params, &mut out, budget);
    let outcome = builder.construct(&namespace, &mut pass);
    (outcome, out)
}

fn value(index: i32, t: &str, d: &str) -> (i32, String, String) {
    (index, t.into(), d.into())
}

#[test]
fn the_manuals_example() {
    let (outcome, values) = run(MANUAL, &base(), "box(10,20,30,40)");
    assert_eq!(outcome, Outcome::Built);
    assert_eq!(
        values,
        [
            value(1, "URL", "http://example.org/data/abc?wh=40&ww=30&wy=20&wx=10"),
            value(2, "EMAIL", "contact@example.org")
        ]
    );
    // Any other extension: the <else> of the expression, where `x` is the
    // extension as written (a negated test binds the whole value).
    let (_, values) = run(MANUAL, &base(), "page7");
    assert_eq!(values[0], value(1, "URL", "http://example.org/data/abc?page7"));
    // Matching is case-insensitive on a case-insensitive server.
    let (_, values) = run(MANUAL, &base(), "BOX(1,2,3,4)");
    assert_eq!(values[0].2, "http://example.org/data/abc?wh=4&ww=3&wy=2&wx=1");
}

#[test]
fn new_values_take_the_first_free_index_from_one() {
    let xml = r#"<namespace><template>
        <value type="URL" data="http://x/${extension}"/>
        <value index="7" type="EMAIL">a@${base}</value>
        <value type="DESC"><p>rich</p><q/></value>
        <value type="NO_DATA"/>
    </template></namespace>"#;
    let (outcome, values) = run(xml, &[], "e1");
    assert_eq!(outcome, Outcome::Built);
    assert_eq!(
        values,
        [value(1, "URL", "http://x/e1"), value(2, "EMAIL", "a@1234/abc"), value(3, "DESC", "<p>rich</p><q/>")]
    );
}

#[test]
fn notfound_def_and_equality() {
    let xml = r#"<namespace><template>
        <def parameter="site"><value type="t" data="https://${extension}.example"/></def>
        <if value="extension" test="equals" expression="gone"><notfound/></if>
        <else><value type="URL" data="${site}/${extension}"/></else>
    </template></namespace>"#;
    assert_eq!(run(xml, &[], "gone"), (Outcome::NotFound, vec![]));
    assert_eq!(run(xml, &[], "here").1, [value(1, "URL", "https://here.example/here")]);
    let negated = r#"<namespace><template>
        <if value="extension" test="matches" expression="[0-9]+" negate="true"><notfound/></if>
        <value type="N" data="${extension}"/>
    </template></namespace>"#;
    assert_eq!(run(negated, &[], "abc").0, Outcome::NotFound);
    assert_eq!(run(negated, &[], "123").1, [value(1, "N", "123")]);
}

#[test]
fn no_template_and_unusable_expressions() {
    assert_eq!(run("<namespace><status>active</status></namespace>", &base(), "x").0, Outcome::NoTemplate);
    // Java-only syntax (a look-behind) matches nothing here instead of failing.
    let xml = r#"<namespace><template>
        <if test="matches" expression="(?&lt;=a)b"><value type="A" data="matched"/></if>
        <else><value type="B" data="not"/></else>
    </template></namespace>"#;
    assert_eq!(run(xml, &[], "ab").1, [value(1, "B", "not")]);
}

#[test]
fn references_are_fetched_then_followed_within_the_limit() {
    let citing = r#"<namespace><template ref="10:1234/TPL"/></namespace>"#;
    let key = (10, "1234/TPL".to_string());
    assert_eq!(run(citing, &[], "e").0, Outcome::NeedRef { index: 10, handle: "1234/TPL".into() });
    let mut refs = HashMap::new();
    refs.insert(key.clone(), Some(r#"<template><value type="URL" data="u/${extension}"/></template>"#.to_string()));
    assert_eq!(run_with(citing, &[], "e", &refs), (Outcome::Built, vec![value(1, "URL", "u/e")]));
    refs.insert(key.clone(), None);
    assert_eq!(run_with(citing, &[], "e", &refs).0, Outcome::NotFound);
    // A template citing itself stops at the limit.
    refs.insert(key, Some(citing.to_string()));
    assert_eq!(run_with(citing, &[], "e", &refs).0, Outcome::NotFound);
    assert_eq!(run(r#"<namespace><template ref="x:1234/TPL"/></namespace>"#, &[], "e").0, Outcome::NoTemplate);
}

/// S1 (issue 41): a `<def>` that doubles its parameter at every step built
/// 2^N KiB from a namespace of ~2 KB until allocation failed and the process
/// aborted. The build stops at the bound on one value, having made no more
/// than that.
#[test]
fn doubling_definitions_stop_at_the_value_bound() {
    let seed = "s".repeat(1024);
    let doublings: String = (0..40).map(|_| r#"<def parameter="x"><value type="T" data="${x}${x}"/></def>"#).collect();
    let xml = format!(
        r#"<namespace><template><def parameter="x"><value type="T" data="{seed}"/></def>{doublings}
        <value type="URL" data="${{x}}"/></template></namespace>"#
    );
    assert_eq!(run(&xml, &[], "e").0, Outcome::Refused(Bound::ValueBytes));
    // Just under the bound it builds: 2^8 KiB = 256 KiB is the largest value.
    let fits: String = (0..7).map(|_| r#"<def parameter="x"><value type="T" data="${x}${x}"/></def>"#).collect();
    let xml = format!(
        r#"<namespace><template><def parameter="x"><value type="T" data="{seed}"/></def>{fits}
        <value type="URL" data="${{x}}"/></template></namespace>"#
    );
    let (outcome, values) = run(&xml, &[], "e");
    assert_eq!(outcome, Outcome::Built);
    assert_eq!(values[0].2.len(), 128 * 1024);
    assert!(values[0].2.len() <= MAX_VALUE_BYTES);
}

/// Many values each under the value bound still stop at the total.
#[test]
fn the_whole_construction_stops_at_the_byte_bound() {
    let seed = "s".repeat(64 * 1024);
    let copies: String = (0..100).map(|_| r#"<value type="T" data="${x}${x}"/>"#).collect();
    let xml = format!(
        r#"<namespace><template><def parameter="x"><value type="T" data="{seed}"/></def>{copies}</template></namespace>"#
    );
    assert_eq!(run(&xml, &[], "e").0, Outcome::Refused(Bound::BuiltBytes));
}

/// S2 (issue 41): 3,000 nested `<if>` overflowed a worker's stack. Built on
/// a thread with tokio's default worker stack, far deeper nesting is refused
/// at the depth bound; just under it builds.
#[test]
fn deep_nesting_is_refused_not_followed() {
    fn nested(depth: usize) -> String {
        let open = r#"<if value="extension" test="equals" expression="e">"#.repeat(depth);
        let close = "</if>".repeat(depth);
        format!(r#"<namespace><template>{open}<value type="URL" data="deep"/>{close}</template></namespace>"#)
    }
    let outcomes = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(|| [100_000, MAX_DEPTH, MAX_DEPTH - 1].map(|depth| run(&nested(depth), &[], "e")))
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(outcomes[0].0, Outcome::Refused(Bound::Depth));
    assert_eq!(outcomes[1].0, Outcome::Refused(Bound::Depth));
    assert_eq!(outcomes[2], (Outcome::Built, vec![value(1, "URL", "deep")]));
    // Nesting through cited templates counts too.
    let citing = r#"<namespace><template ref="10:1234/TPL"/></namespace>"#.to_string();
    let mut refs = HashMap::new();
    refs.insert(
        (10, "1234/TPL".to_string()),
        Some(nested(MAX_DEPTH - 1).replace("<namespace>", "").replace("</namespace>", "")),
    );
    assert_eq!(run_with(&citing, &[], "e", &refs).0, Outcome::Refused(Bound::Depth));
}

/// S3 (issue 41): `<foreach>` sorted every value built so far for each new
/// one, and `matches` compiled its expression at every evaluation: 60 values
/// over 2,000 base values took 18 s. Now the work is counted: a template
/// making 60 values of each of 2,000 is refused (each new value searching past
/// the indexes taken is work too, before the value bound), and an
/// expression over every base value is compiled once (the counted work stays
/// far under the bound).
#[test]
fn foreach_work_is_bounded_and_expressions_compile_once() {
    let many: Vec<HandleValue> = (1..=2000).map(|i| HandleValue::new(i, "URL", format!("u{i}"))).collect();
    let sixty: String = (0..60).map(|_| "<value/>").collect();
    let xml = format!("<namespace><template><foreach>{sixty}</foreach></template></namespace>");
    let (outcome, _) = run(&xml, &many, "e");
    assert!(matches!(outcome, Outcome::Refused(Bound::Values | Bound::Work)), "{outcome:?}");
    // The finding's expression: Unicode \w repeated so often that it passes
    // the compiled-size bound (it matches nothing); then a smaller one that
    // compiles, matching every value. Each is compiled once for all 2,000.
    for (expression, matched) in [(r"(?:[a-z]{1,50}\w{1,50}){1,8}", 0), (r"(?:[a-z]{1,10}[0-9_]{1,10}){1,4}", 2000)] {
        let xml = format!(
            r#"<namespace><template><foreach>
                <if value="data" test="matches" expression="{expression}"><value/></if>
            </foreach></template></namespace>"#
        );
        let mut budget = Budget::default();
        let (outcome, out) = build(&xml, &many, "e", &HashMap::new(), &mut budget);
        assert_eq!((outcome, out.len()), (Outcome::Built, matched), "{expression}");
        assert!(budget.used() < MAX_WORK / 4, "{expression}: work {}", budget.used());
    }
}

/// Scopes copy no parameters (2,000 defined cost nothing per scope entered),
/// and every element visited counts: 200 rounds of 2,000 tests are built,
/// 600 rounds pass the work bound.
#[test]
fn work_counts_every_element_visited_however_many_parameters() {
    let defs: String =
        (0..2000).map(|i| format!(r#"<def parameter="p{i}"><value type="T" data="v"/></def>"#)).collect();
    let ifs: String = (0..2000).map(|_| r#"<if value="extension" test="equals" expression="e"></if>"#).collect();
    let xml = format!("<namespace><template>{defs}<foreach>{ifs}</foreach></template></namespace>");
    let base = |n: i32| -> Vec<HandleValue> { (1..=n).map(|i| HandleValue::new(i, "URL", "u")).collect() };
    let mut budget = Budget::default();
    assert_eq!(build(&xml, &base(200), "e", &HashMap::new(), &mut budget).0, Outcome::Built);
    assert!(budget.used() < 2 * 200 * 2000, "work {}", budget.used());
    assert_eq!(run(&xml, &base(600), "e").0, Outcome::Refused(Bound::Work));
}
