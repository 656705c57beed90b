package flightselect;

import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.WeakHashMap;

import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.execution.datasources.v2.python.PythonScan;

/**
 * An optimizer rule (run after scan pushdown) that keeps one query's pushed Python read from
 * serving another query of the same relation.
 *
 * <p>Why it exists (PySpark 4.3.0): {@code PythonScanBuilder.pushFilters} stores the read it
 * planned on the relation's {@code PythonDataSourceV2} ({@code setReadInfo}), and
 * {@code PythonBatch} takes whatever is stored ({@code getOrCreateReadInfo} plans anew only
 * while nothing is). A later query on that relation that pushes nothing calls no Python and
 * reads with the earlier query's filters. Nothing in Spark clears the stored read.
 *
 * <p>What it does, once per query (per new {@code PythonScan}): if the stored read is the very
 * object stored when the relation's previous query was optimized, this query did not plan it,
 * so it is cleared and {@code PythonBatch} plans an unfiltered read. A read planned lazily by
 * {@code PythonBatch} is unfiltered, so keeping it is harmless. Two scans of one relation in
 * one plan (a self-join) share the stored read, so it is cleared for them too. The Python
 * source returns every pushed filter to Spark as well, so a query that ends up with an
 * unfiltered read is still filtered by Spark: this rule only decides which rows are sent.
 *
 * <p>Known limit: two threads optimizing queries of one relation at the same moment can
 * interleave between one query's {@code pushFilters} and this rule's run for it; the other
 * query may then keep a read it did not plan. Sequential actions (any order) are exact.
 *
 * <p>Hand-written: Spark has no hook for this; it relies on private fields (read by
 * reflection) and is pinned by tests/compute_client/test_spark_reuse.py.
 */
public final class ForgetStalePythonReads extends Rule<LogicalPlan> {
  private final Map<PythonDataSourceV2, Object> storedAtLastQuery = new WeakHashMap<>();
  private final Map<PythonScan, Boolean> seenScans = new WeakHashMap<>();

  @Override
  public synchronized LogicalPlan apply(LogicalPlan plan) {
    List<PythonScan> scans = new ArrayList<>();
    collect(plan, scans);
    Map<PythonDataSourceV2, Integer> scansPerSource = new IdentityHashMap<>();
    for (PythonScan scan : scans) {
      scansPerSource.merge(field(scan, PythonScan.class, "ds", PythonDataSourceV2.class), 1,
          Integer::sum);
    }
    for (PythonScan scan : scans) {
      if (seenScans.put(scan, Boolean.TRUE) != null) {
        continue;  // the rule runs to a fixed point: decide once per query
      }
      PythonDataSourceV2 source = field(scan, PythonScan.class, "ds", PythonDataSourceV2.class);
      Object stored = field(source, PythonDataSourceV2.class, "readInfo", Object.class);
      boolean stale = stored != null && storedAtLastQuery.get(source) == stored;
      if (stale || scansPerSource.get(source) > 1) {
        source.setReadInfo(null);
        stored = null;
      }
      storedAtLastQuery.put(source, stored);
    }
    return plan;
  }

  private static void collect(LogicalPlan node, List<PythonScan> scans) {
    if (node instanceof DataSourceV2ScanRelation) {
      Scan scan = ((DataSourceV2ScanRelation) node).scan();
      if (scan instanceof PythonScan) {
        scans.add((PythonScan) scan);
      }
    }
    scala.collection.Iterator<LogicalPlan> children = node.children().iterator();
    while (children.hasNext()) {
      collect(children.next(), scans);
    }
    scala.collection.Iterator<LogicalPlan> subqueries = node.subqueries().iterator();
    while (subqueries.hasNext()) {
      collect(subqueries.next(), scans);
    }
  }

  private static <T> T field(Object owner, Class<?> type, String name, Class<T> as) {
    try {
      Field field = type.getDeclaredField(name);
      field.setAccessible(true);
      return as.cast(field.get(owner));
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException(
          "flight-select: this Spark version has no " + type.getSimpleName() + "." + name, e);
    }
  }
}
