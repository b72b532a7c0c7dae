use super::*;

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
    let doc = roxmltree::Document::parse(xml).unwrap();
    let builder = Builder { base_values: base, case_sensitive: false, refs };
    let params = Params::new(&format!("1234/abc@{extension}"), "1234/abc", extension);
    let mut out = Vec::new();
    let outcome = builder.construct(doc.root_element(), &params, &mut out, &mut 0);
    let shown = out
        .iter()
        .map(|v| (v.index, String::from_utf8_lossy(&v.value_type).into(), String::from_utf8_lossy(&v.data).into()))
        .collect();
    (outcome, shown)
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
